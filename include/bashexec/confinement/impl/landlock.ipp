// The bodies of confinement/landlock.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement/landlock.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <fmt/core.h>

#include "bashexec/detail/kernel/seccomp_filter.hpp"
#include "bashexec/detail/trust/writable_roots.hpp"

namespace bashexec {

namespace detail {

/// What a landlock policy builds once and every spawn shares (copies of the
/// policy share it too): the seccomp programs, and the read-only ruleset,
/// which depends on nothing a call passes (no root, no protected paths) —
/// with the one hook context every read-only spawn gets, so their plans carry
/// the same hook (a pooling spawn policy keys on it: launch_plan::hook_owner).
/// Built lazily by the first spawn that needs each, thread-safe.
struct landlock_built_once {
  seccomp_filter_cache filters;
  // [0] for commands without a terminal, [1] for those on one (which may
  // also write and drive their own /dev/tty).
  std::once_flag read_only_once[2];
  unique_fd read_only_ruleset[2];
  landlock_ruleset read_only_context[2];
};

BASHEXEC_DECL std::shared_ptr<landlock_built_once> make_landlock_built_once() {
  return std::make_shared<landlock_built_once>();
}

BASHEXEC_DECL int landlock_apply(const void* context) noexcept {
  const auto* ruleset = static_cast<const landlock_ruleset*>(context);
  if (ruleset->user_namespace)
    if (int error = enter_own_user_namespace(); error != 0) return error;
  // Mounts first: Landlock refuses them once the domain is on.
  if (int error = bind_read_only_in_private_mount_namespace(ruleset->read_only_bind_names.data(),
                                                            static_cast<int>(ruleset->read_only_bind_names.size()));
      error != 0)
    return error;
  // Unprivileged restriction requires no_new_privs; it also keeps a setuid
  // binary from escaping the domain.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (landlock_restrict_self(ruleset->number, 0) != 0) return errno;
  if (int error = drop_all_capabilities(); error != 0) return error;
  if (ruleset->filter)
    if (int error = install_seccomp_filter(*ruleset->filter); error != 0) return error;
  return 0;
}

}  // namespace detail

BASHEXEC_DECL confined_launch landlock::prepare(sandbox_mode mode, const std::filesystem::path& root,
                                               launch_plan& plan) const {
  detail::refuse_unconfined_mode(name, mode);
  const int version = abi();
  if (version < 0) throw sandbox_unavailable(mode, unavailable_message(mode, -version));

  const bool network = isolates_network(network_);
  const std::optional<enforcement> net_level = network ? network_level(version) : enforcement::full;
  if (!net_level)
    throw sandbox_unavailable(
        mode, fmt::format("landlock cannot confine the network (sandbox.network = {}): Landlock ABI {} has no "
                          "network rights (ABI 4, Linux >= 6.7) and no seccomp filter is built for this "
                          "architecture; use bwrap, or sandbox.network = full",
                          network_, version));

  detail::seccomp_parts parts;
  parts.network = network && detail::seccomp_filter_supported;
  parts.metadata_writes = mode == sandbox_mode::read_only && detail::seccomp_filter_supported;
  confined_launch launch;
  launch.info.mode = mode;
  const bool files_full =
      file_level(mode, version) == enforcement::full && !leaves_protected_path_writable(mode, root);
  launch.info.level = files_full && *net_level == enforcement::full ? enforcement::full : enforcement::partial;

  if (mode == sandbox_mode::read_only) {
    // The same for every call: built by the first, shared by the rest (the
    // kernel copies a ruleset into each new domain, so one descriptor can
    // serve concurrent spawns), and so is the hook's context. The plan owns
    // it through hook_owner, so a pool may run the same hook later.
    const int kind = plan.controlling_terminal ? 1 : 0;
    std::call_once(built_->read_only_once[kind], [&] {
      built_->read_only_ruleset[kind] = build_ruleset(mode, root, version, network, kind == 1);
      auto& context = built_->read_only_context[kind];
      context.number = built_->read_only_ruleset[kind].get();
      if (parts.any()) context.filter = &built_->filters.get(parts);
      context.user_namespace = !privileged() && detail::user_namespace_available();
    });
    const detail::landlock_ruleset& context = built_->read_only_context[kind];
    plan.hooks.add(pre_exec_hook{&detail::landlock_apply, &context, hook_stage(context)});
    plan.hook_owner = std::shared_ptr<const void>(built_, &context);
    launch.keep_alive = built_;
    return launch;
  }

  auto ruleset = std::make_shared<detail::landlock_ruleset>();
  ruleset->built = built_;
  if (parts.any()) ruleset->filter = &built_->filters.get(parts);
  ruleset->fd = build_ruleset(mode, root, version, network, plan.controlling_terminal);
  ruleset->number = ruleset->fd.get();
  ruleset->user_namespace = !privileged() && detail::user_namespace_available();
  // A spill directory under a granted root (a workspace of `/`) is bound
  // read-only like a protected path; where that cannot be done, the spawn is
  // refused rather than let the command write it.
  for (const auto& path : plan.read_only_paths) {
    if (mode != sandbox_mode::workspace_write || !detail::writable_root_holding(path, root)) continue;
    if (!can_bind_read_only())
      throw sandbox_unavailable(
          mode, fmt::format("the spill directory {} lies under {}, which workspace-write grants, and Landlock cannot "
                            "bind it read-only here (not privileged, no user namespace): choose a workspace root "
                            "or spill_parent that does not hold it",
                            path.string(), detail::writable_root_holding(path, root)->string()));
    ruleset->read_only_binds.push_back(path.string());
  }
  if (mode == sandbox_mode::workspace_write && can_bind_read_only()) {
    for (const auto& path : detail::protected_locations(root, protected_, scan_limit_))
      ruleset->read_only_binds.push_back(path.string());
    // The binds refuse a write with EROFS, not Landlock's EACCES: the
    // engine counts that dialect as a denial too for this spawn.
    launch.read_only_binds = !ruleset->read_only_binds.empty();
    for (const auto& path : ruleset->read_only_binds) ruleset->read_only_bind_names.push_back(path.c_str());
  }

  plan.hooks.add(pre_exec_hook{&detail::landlock_apply, ruleset.get(), hook_stage(*ruleset)});
  launch.keep_alive = std::move(ruleset);
  return launch;
}

BASHEXEC_DECL bool landlock::leaves_protected_path_writable(sandbox_mode mode,
                                                             const std::filesystem::path& root) const {
  if (mode != sandbox_mode::workspace_write || can_bind_read_only()) return false;
  try {
    return !detail::protected_locations(root, protected_, scan_limit_).empty();
  } catch (const sandbox_unavailable&) {
    return true;  // not even found: certainly not bound
  }
}

BASHEXEC_DECL const char* landlock::hook_stage(const detail::landlock_ruleset& ruleset) noexcept {
  if (ruleset.user_namespace)
    return ruleset.filter ? "user namespace / landlock_restrict_self / seccomp filter"
                          : "user namespace / landlock_restrict_self";
  return ruleset.filter ? "landlock_restrict_self / seccomp filter" : "landlock_restrict_self";
}

BASHEXEC_DECL detail::unique_fd landlock::build_ruleset(sandbox_mode mode, const std::filesystem::path& root,
                                                       int version, bool network, bool terminal) {
  const std::uint64_t handled = detail::landlock_fs_rights_for_abi(version);
  detail::landlock_ruleset_attr attr;
  attr.handled_access_fs = handled;
  if (network && version >= detail::landlock_net_abi)
    attr.handled_access_net = detail::landlock_access_net_bind_tcp | detail::landlock_access_net_connect_tcp;
  if (version >= detail::landlock_scope_abi) attr.scoped = detail::landlock_scope_signal;
  if (network && version >= detail::landlock_scope_abi)
    attr.scoped |= detail::landlock_scope_abstract_unix_socket;
  detail::unique_fd fd(detail::landlock_create_ruleset(&attr, detail::landlock_ruleset_attr_size(attr), 0));
  if (!fd) detail::throw_syscall("landlock_create_ruleset");

  allow(fd.get(), mode, "/", detail::landlock_read_rights & handled, true);
  const std::uint64_t null_rights =
      (detail::landlock_access_fs_write_file | detail::landlock_access_fs_truncate) & handled;
  allow(fd.get(), mode, "/dev/null", null_rights, false);
  // A command on a terminal of its own may write and drive it through
  // /dev/tty, which names only the caller's controlling terminal: that
  // one (TIOCSTI there types into its own input, nothing of the host's).
  if (terminal)
    allow(fd.get(), mode, "/dev/tty",
          (detail::landlock_access_fs_write_file | detail::landlock_access_fs_ioctl_dev) & handled, false);
  if (mode == sandbox_mode::workspace_write) {
    allow(fd.get(), mode, root, handled, true);
    allow(fd.get(), mode, "/tmp", handled, false);
  }
  return fd;
}

BASHEXEC_DECL std::string landlock::unavailable_message(sandbox_mode mode, int error) {
  const char* why = error == ENOSYS       ? "this kernel was built without it"
                    : error == EOPNOTSUPP ? "it is built in but disabled at boot"
                                          : "the kernel refused to report its version";
  return fmt::format("landlock cannot confine {} mode: {} (landlock_create_ruleset: {}); {}", mode, why,
                     std::strerror(error), remedy);
}

BASHEXEC_DECL void landlock::allow(int ruleset_fd, sandbox_mode mode, const std::filesystem::path& path,
                                  std::uint64_t rights, bool required) {
  detail::unique_fd target(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!target) {
    if (!required) return;
    throw sandbox_unavailable(mode, fmt::format("landlock: cannot open {} for a rule: {}", path.string(),
                                                std::strerror(errno)));
  }
  struct stat info;
  if (::fstat(target.get(), &info) != 0) detail::throw_syscall(fmt::format("fstat {}", path.string()));
  if (!S_ISDIR(info.st_mode)) rights &= detail::landlock_file_rights;
  if (rights == 0) return;
  const detail::landlock_path_beneath_attr rule{rights, target.get()};
  if (detail::landlock_add_rule(ruleset_fd, detail::landlock_rule_path_beneath, &rule, 0) != 0)
    detail::throw_syscall(fmt::format("landlock_add_rule {}", path.string()));
}

}  // namespace bashexec
