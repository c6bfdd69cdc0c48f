// The bodies of detail/engine/launch_builder.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/launch_builder.hpp"


#include <cerrno>
#include <csignal>
#include <algorithm>
#include <cstring>
#include <map>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/engine/shell_state_capture.hpp"
#include "bashexec/detail/kernel/capabilities.hpp"
#include "bashexec/detail/kernel/pseudo_terminal.hpp"
#include "bashexec/detail/kernel/user_namespace.hpp"
#include "bashexec/detail/trust/find_program.hpp"

namespace bashexec::detail {

BASHEXEC_DECL unique_fd above_stdio(unique_fd fd) {
  if (fd.get() > 2) return fd;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) throw_syscall("fcntl(F_DUPFD_CLOEXEC)");
  return unique_fd(moved);
}

BASHEXEC_DECL void adopt_placed_cgroup(process_handle& process, prepared_launch& launch) {
  try {
    if (!launch.cgroup)
      throw infrastructure_error(fmt::format(
          "the spawn policy placed its process in cgroup {}, but this executor does not contain by cgroup",
          process.placed_in_cgroup().string()));
    cgroup_lease placed = launch.cgroup->exchange_for(process.placed_in_cgroup());
    launch.cgroup.reset();  // unused: back to the free list
    launch.cgroup.emplace(std::move(placed));
  } catch (...) {
    process.signal_group(SIGKILL);
    process.wait_blocking();
    throw;
  }
}

BASHEXEC_DECL child_pipe make_child_pipe(bool parent_reads) {
  auto [r, w] = make_pipe();
  unique_fd parent = above_stdio(parent_reads ? std::move(r) : std::move(w));
  unique_fd child = above_stdio(parent_reads ? std::move(w) : std::move(r));
  if (::fcntl(parent.get(), F_SETFL, O_NONBLOCK) != 0) throw_syscall("fcntl(O_NONBLOCK)");
  return {std::move(parent), std::move(child)};
}

BASHEXEC_DECL unique_fd reopen_pipe_end(const unique_fd& fd) {
  unique_fd copy(::open(fmt::format("/proc/self/fd/{}", fd.get()).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!copy) throw_syscall("open /proc/self/fd (the stdin pipe, anew)");
  return above_stdio(std::move(copy));
}

BASHEXEC_DECL void launch_builder::add_terminal(prepared_launch& p, const exec_spec& spec) const {
  pseudo_terminal pty = open_pseudo_terminal(*spec.terminal);
  p.terminal_device = terminal_device(pty.slave.get());
  p.pipes.terminal = true;
  // Input goes to the master itself (child_run.hpp, parent_pipes::input);
  // `resolve` refuses stdin_data here.
  p.pipes.out = std::move(pty.master);
  p.child_in = std::move(pty.slave);
  p.plan.stdin_fd = p.plan.stdout_fd = p.plan.stderr_fd = p.child_in.get();
  p.plan.controlling_terminal = true;
  // TERM names a real terminal here; the request's own TERM still wins.
  std::map<std::string, std::string> env;
  if (spec.env) env = *spec.env;
  env.try_emplace("TERM", config_.terminal.term);
  p.plan.env = child_environment(&env, config_.scrub);
}

BASHEXEC_DECL void launch_builder::add_state_capture(prepared_launch& p, const exec_spec& spec) const {
  p.state_file = make_state_file();
  const int fd = 3 + static_cast<int>(p.plan.inherited_fds.size());
  p.plan.inherited_fds.push_back(p.state_file.get());
  p.plan.argv = {config_.shell.string(), "-c", state_wrapper(fd), config_.shell.string(), spec.command};
}

BASHEXEC_DECL void launch_builder::remove_unset(std::vector<std::string>& env, const exec_spec& spec) {
  std::erase_if(env, [&spec](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('='));
    if (spec.env && spec.env->count(name)) return false;
    return std::find(spec.env_unset.begin(), spec.env_unset.end(), name) != spec.env_unset.end();
  });
}

BASHEXEC_DECL void require_directory(const std::filesystem::path& workdir) {
  struct stat st {};
  if (::stat(workdir.c_str(), &st) != 0)
    throw infrastructure_error(fmt::format("workdir {}: {}", workdir.string(), std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    throw infrastructure_error(fmt::format("workdir {}: not a directory", workdir.string()));
  if (::access(workdir.c_str(), X_OK) != 0)
    throw infrastructure_error(fmt::format("workdir {}: {}", workdir.string(), std::strerror(errno)));
}

BASHEXEC_DECL std::string shell_refusal(const std::filesystem::path& shell, const std::filesystem::path& workspace_root) {
  if (!shell.is_absolute()) return "not an absolute path";
  return program_refusal(lookup_trusted_program(shell), workspace_root);
}

BASHEXEC_DECL containment_choice choose_containment(const executor_config& config, bool spawn_joins_cgroup,
                                                    std::string_view spawn_name) {
  containment_choice choice;
  if (config.containment == process_containment::process_group) return choice;
  if (!spawn_joins_cgroup) {
    choice.fallback = fmt::format("the {} spawn policy cannot join a cgroup before exec (use spawn_with<fork_exec>)",
                                  spawn_name);
    return choice;
  }
  try {
    choice.cgroups = executor_cgroup::create(locate_cgroup_parent(config.cgroup_parent));
  } catch (const infrastructure_error& e) {
    if (config.containment == process_containment::cgroup) throw;
    choice.fallback = e.what();
  }
  return choice;
}

BASHEXEC_DECL launch_builder::launch_builder(const executor_config& config,
                                             const std::filesystem::path& workspace_root, spill_directory& spills,
                                             std::shared_ptr<executor_cgroup> cgroups)
    : config_(config),
      workspace_root_(workspace_root),
      shell_refusal_(shell_refusal(config.shell, workspace_root)),
      spills_(spills),
      spills_under_writable_root_(writable_root_holding(spills.parent(), workspace_root).has_value()),
      cgroups_(std::move(cgroups)) {
  dev_null_ = unique_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null_) throw_syscall("open /dev/null");
  dev_null_ = above_stdio(std::move(dev_null_));
  if (proxies_network(config.sandbox.network) && has_effective_capability(CAP_SYS_ADMIN))
    egress_namespaces_ = std::make_unique<egress_namespace_pool>();
}

BASHEXEC_DECL void launch_builder::require_runnable(const exec_spec& spec) const {
  require_directory(spec.workdir);
  if (!shell_refusal_.empty())
    throw infrastructure_error(fmt::format("shell {}: {}", config_.shell.string(), shell_refusal_));
}

BASHEXEC_DECL void launch_builder::add_egress_step(prepared_launch& p, sandbox_mode mode,
                                                   const std::vector<std::string>& grants) const {
  // CAP_SYS_ADMIN, not uid 0, is what unshare(CLONE_NEWNET) needs: root in
  // a user namespace without it (or with capabilities dropped) is ordinary.
  const bool root = has_effective_capability(CAP_SYS_ADMIN);
  if (!root && !user_namespace_available())
    throw sandbox_unavailable(mode, "sandbox.network = allowlist needs a network namespace of the command's own, "
                                    "which a process without CAP_SYS_ADMIN makes inside a user namespace, and "
                                    "user namespaces are refused here (user.max_user_namespaces, an LSM or a "
                                    "seccomp profile); nothing ran");
  p.egress = std::make_unique<prepared_launch::egress_step>();
  if (egress_namespaces_) p.egress->ready = egress_namespaces_->take();
  if (p.egress->ready) {
    p.egress->context.ready_namespace_fd = p.egress->ready->network.get();
  } else {
    p.egress->context.channel_fd = p.egress->channel.emplace().child_end();
    p.egress->context.own_user_namespace = !root;
  }
  p.egress->grants = grants;
  p.plan.hooks.add(pre_exec_hook{&enter_egress_namespace, &p.egress->context, "egress network namespace"});
  // The proxy for every tool that reads the variables (curl, pip, npm, git,
  // cargo); a tool that ignores them reaches nothing at all. The command's
  // own loopback stays direct. Any inherited value is replaced.
  const std::string http = fmt::format("http://127.0.0.1:{}", egress_proxy_port);
  const std::string socks = fmt::format("socks5h://127.0.0.1:{}", egress_proxy_port);
  const std::pair<std::string_view, std::string_view> variables[] = {
      {"HTTP_PROXY", http},   {"http_proxy", http},   {"HTTPS_PROXY", http},
      {"https_proxy", http},  {"ALL_PROXY", socks},   {"all_proxy", socks},
      {"NO_PROXY", "localhost,127.0.0.1,::1"}, {"no_proxy", "localhost,127.0.0.1,::1"}};
  std::erase_if(p.plan.env, [&](const std::string& entry) {
    for (const auto& [name, value] : variables)
      if (entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 && entry[name.size()] == '=')
        return true;
    return false;
  });
  for (const auto& [name, value] : variables) p.plan.env.push_back(fmt::format("{}={}", name, value));
}

BASHEXEC_DECL std::unique_ptr<egress_session> launch_builder::open_egress(prepared_launch& launch) const {
  if (!launch.egress) return nullptr;
  unique_fd listener =
      launch.egress->ready ? std::move(launch.egress->ready->listener) : launch.egress->channel->take_listener();
  const std::vector<std::string> grants = std::move(launch.egress->grants);
  launch.egress.reset();
  if (!listener)
    throw infrastructure_error("the allowlist spawn returned without its proxy listener; the command was stopped");
  if (grants.empty()) return config_.sandbox.gateway->open(std::move(listener), config_.sandbox.egress);
  network_policy widened = config_.sandbox.egress;
  widened.allowed_domains.insert(widened.allowed_domains.end(), grants.begin(), grants.end());
  return config_.sandbox.gateway->open(std::move(listener), widened);
}

BASHEXEC_DECL network_report launch_builder::close_egress(egress_session& session) const {
  session.close();
  if (egress_namespaces_) egress_namespaces_->replenish();
  return session.snapshot();
}

}  // namespace bashexec::detail
