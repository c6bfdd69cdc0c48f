// laws/confinement: the laws every confining policy obeys (docs/contract.md
// items 4, 13, 16, 17 and "Beyond": protected paths, spill files, network),
// checked through a real executor with real commands, as a function a
// policy's author runs against their own type:
//   auto report = bashexec::laws::check_confinement_laws<my_confinement>(my_config);
//   switch (report.verdict()) { … }   // laws/report.hpp: hold, unavailable, broken
// The laws:
//   - the runner starts: a confined `true` runs. A policy whose runner fails
//     (or whose `true` fails) on a machine that can confine — an unknown
//     option, a launcher that is not there — is broken, reported as a
//     violation; only a machine that lacks the backend (the policy said so
//     before running anything, or its runner was refused namespaces or
//     privileges) makes the report `unavailable`. Either way nothing else
//     is checked;
//   - writes denied per mode: read-only lets nothing be written but
//     /dev/null; workspace-write lets the workspace (create, mkdir, rename)
//     and /tmp be written and nothing else; danger-full-access is not
//     confined at all;
//   - the shell's own working directory: under workspace-write a command
//     started in a directory inside the workspace writes relative paths
//     there (the cwd is on the writable mount, not a read-only view of it);
//     under read-only it cannot;
//   - /dev/null writable, and files readable, under every confined mode;
//   - denial dialect recognized: a denied write is reported `denied` (the
//     policy's `is_denial` knows what its denials print), a plain failure is
//     neither denied nor a runner failure, and every result names its mode
//     (with a level when confined);
//   - a background task is confined and classified like a foreground run;
//   - a kill is prompt: a confined run whose 200 ms timeout fires, and a
//     killed background task, end well within the kill grace (the SIGTERM
//     reaches the command; a runner that swallows it makes every kill wait
//     for the SIGKILL);
//   - protected paths stay read-only under workspace-write (`.git`, nested
//     repositories too), refused as a denial, where the policy says `full`;
//   - read-only paths: a spill file under the workspace is readable by a
//     later command and writable by none (or the spawn is refused);
//   - network: `full` changes nothing; `none` keeps a confined command off
//     the host's loopback (where the policy says `full`), its refusal is not
//     a file denial, and danger-full-access ignores the knob.
// A law a policy does not promise here (it says `partial`) goes to
// `report::not_checked` with the reason. The shipped confinements pass them
// (tests/laws/test_confinement_laws.cpp); so must a new one (docs/extending.md).
// Scratch directories go under `scratch` (never /tmp: workspace-write
// grants it) and are removed afterwards.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include <fmt/core.h>

#include "bashexec/basic_executor.hpp"
#include "bashexec/detail/kernel/shared_temp.hpp"
#include "bashexec/detail/kernel/unique_fd.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/impl/basic_executor.hpp"  // composes its own executors, in either mode
#include "bashexec/laws/detail/scratch.hpp"
#include "bashexec/laws/report.hpp"
#include "bashexec/network_access.hpp"
#include "bashexec/policies.hpp"
#include "bashexec/spawn/fork_exec.hpp"

namespace bashexec::laws {

namespace detail {

/// What one command did, foreground or background.
struct outcome {
  std::optional<int> exit_code;
  std::string text;  // stdout then stderr (foreground only)
  std::optional<sandbox_info> sandbox;
  bool timed_out = false;
};

/// Whether a runner's failure is the machine refusing what every sandbox
/// needs (namespaces, mounts, privileges), not the policy misusing its
/// runner. Case-insensitive.
inline bool machine_refused(std::string_view said) {
  std::string lower(said);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view sign : {"operation not permitted", "no permissions to", "creating new namespace failed",
                                "setting up uid map", "not supported", "function not implemented"})
    if (lower.find(sign) != std::string::npos) return true;
  return false;
}

/// A TCP listener on the host's 127.0.0.1, on a port the kernel picked.
class loopback_listener {
 public:
  loopback_listener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (!fd_) bashexec::detail::throw_syscall("socket");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      bashexec::detail::throw_syscall("bind");
    if (::listen(fd_.get(), 16) != 0) bashexec::detail::throw_syscall("listen");
    socklen_t size = sizeof address;
    if (::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&address), &size) != 0)
      bashexec::detail::throw_syscall("getsockname");
    port_ = ntohs(address.sin_port);
  }
  int port() const noexcept { return port_; }

 private:
  bashexec::unique_fd fd_;
  int port_ = 0;
};

}  // namespace detail

/// Checks `Confinement`, built from `own` (its settings), against the
/// confinement laws above, through executors over `Spawn`.
template <class Confinement, class Spawn = fork_exec>
  requires confining_policy<Confinement>
report check_confinement_laws(const typename Confinement::config& own = {},
                              const std::filesystem::path& scratch = "/var/tmp") {
  using executor_type = basic_executor<policies<spawn_with<Spawn>, confine_with<Confinement>>>;
  using clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  report result;
  detail::scratch_directory workspace(scratch, "bashexec-laws-ws-");
  detail::scratch_directory outside(scratch, "bashexec-laws-out-");
  // Unpredictable: nobody can plant a link at the name before the command writes it.
  const std::filesystem::path in_tmp = "/tmp/" + bashexec::detail::random_name("bashexec-laws-");
  struct remove_in_tmp {
    const std::filesystem::path& path;
    ~remove_in_tmp() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } cleanup{in_tmp};
  detail::write_text(workspace.path() / "readme", "readable\n");
  std::filesystem::create_directory(workspace.path() / "sub");
  const detail::loopback_listener listener;
  const std::map<std::string, std::string> env{{"WS", workspace.path().string()},
                                               {"OUT", outside.path().string()},
                                               {"T", in_tmp.string()},
                                               {"PORT", std::to_string(listener.port())}};

  executor_config config;
  config.sandbox.workspace_root = workspace.path();
  config.default_timeout = milliseconds(30000);
  // The kill laws bound a kill well within this grace: a swallowed SIGTERM
  // shows as a wait for the SIGKILL.
  config.kill_grace = milliseconds(3000);
  config.error_sink = [](std::string_view) {};
  executor_type executor(config, own);

  auto observe = [&](executor_type& on, sandbox_mode mode, const std::string& command, bool background = false,
                     std::optional<std::filesystem::path> workdir = std::nullopt) {
    detail::outcome seen;
    exec_spec spec = on.resolve({.command = command, .workdir = std::move(workdir), .env = env, .mode = mode});
    if (background) {
      const task_snapshot done = on.wait(on.start(std::move(spec)));
      seen.exit_code = done.exit_code;
      seen.sandbox = done.sandbox;
    } else {
      run_result run = on.run(spec);
      seen.exit_code = run.exit_code;
      seen.text = run.out.text + run.err.text;
      seen.sandbox = std::move(run.sandbox);
      seen.timed_out = run.timed_out;
    }
    return seen;
  };
  auto violated = [&](std::string_view law, std::string_view mode, std::string_view what, const detail::outcome& seen) {
    result.violations.push_back(fmt::format("{}: {} ({}): {} [exit {}, denied {}, output \"{}\"]", Confinement::name,
                                            law, mode, what, seen.exit_code.value_or(-1),
                                            seen.sandbox && seen.sandbox->denied, seen.text));
  };
  auto not_checked = [&](std::string_view law, std::string_view why) {
    result.not_checked.push_back(fmt::format("{}: {}: {}", Confinement::name, law, why));
  };
  auto names_its_mode = [&](sandbox_mode mode, const detail::outcome& seen) {
    const bool confined = mode != sandbox_mode::danger_full_access;
    if (!seen.sandbox || seen.sandbox->mode != mode || seen.sandbox->level.has_value() != confined)
      violated("denial dialect recognized", fmt::format("{}", mode), "the result does not name its mode and level",
               seen);
  };
  auto full = [](const detail::outcome& seen) { return seen.sandbox && seen.sandbox->level == enforcement::full; };
  // A refused write: it failed, left nothing, and was reported as a denial.
  auto refused = [&](std::string_view law, std::string_view where, const detail::outcome& seen,
                     const std::filesystem::path& target, const std::string& before) {
    const bool unchanged = before.empty() ? !std::filesystem::exists(target) : detail::read_text(target) == before;
    if (seen.exit_code == 0 || !unchanged)
      violated(law, where, fmt::format("a write to {} succeeded", target.string()), seen);
    else if (!seen.sandbox || !seen.sandbox->denied || seen.sandbox->runner_failed)
      violated("denial dialect recognized", where, fmt::format("a refused write to {} is not reported as denied",
                                                               target.string()), seen);
  };
  auto denied_write = [&](sandbox_mode mode, const std::filesystem::path& target, bool background = false) {
    const detail::outcome seen = observe(executor, mode, fmt::format("echo x > \"{}\"", target.string()), background);
    names_its_mode(mode, seen);
    refused("writes denied per mode", fmt::format("{}{}", mode, background ? ", background" : ""), seen, target, "");
  };

  try {
    // The first confined call tells whether the policy works here at all:
    // in the background, where a runner failure is a fact of the task.
    const task_id first = executor.start(executor.resolve({.command = "true", .env = env, .mode = sandbox_mode::read_only}));
    const task_snapshot done = executor.wait(first);
    if (done.sandbox && done.sandbox->runner_failed) {
      std::string said = done.start_error.value_or("");
      said += (said.empty() ? "" : "\n") + executor.read_output(first).delta;
      for (auto at = said.find("[stderr]\n"); at != std::string::npos; at = said.find("[stderr]\n")) said.erase(at, 9);
      while (!said.empty() && said.back() == '\n') said.pop_back();
      if (detail::machine_refused(said)) {
        result.unavailable = fmt::format("{} cannot confine on this machine: {}", Confinement::name, said);
      } else {
        result.violations.push_back(fmt::format(
            "{}: the runner starts (read-only): its runner failed, and not because this machine refuses "
            "namespaces or privileges — a broken policy, not an unavailable one: {}",
            Confinement::name, said));
      }
      return result;
    }
    if (done.exit_code != 0) {
      // Nothing can be confined if `true` cannot run: the rest would only repeat it.
      std::string said = executor.read_output(first).delta;
      for (auto at = said.find("[stderr]\n"); at != std::string::npos; at = said.find("[stderr]\n")) said.erase(at, 9);
      if (detail::machine_refused(said)) {
        result.unavailable = fmt::format("{} cannot confine on this machine: {}", Confinement::name, said);
        return result;
      }
      detail::outcome seen{done.exit_code, said, done.sandbox, false};
      violated("the runner starts", "read-only",
               "a confined `true` failed, though the machine did not refuse it (nothing else was checked)", seen);
      return result;
    }
  } catch (const sandbox_unavailable& error) {
    result.unavailable = error.what();
    return result;
  }

  for (sandbox_mode mode : {sandbox_mode::read_only, sandbox_mode::workspace_write}) {
    const std::string name = fmt::format("{}", mode);
    const detail::outcome null =
        observe(executor, mode, "echo x > /dev/null && cat \"$WS/readme\" && head -c 1 /bin/sh > /dev/null");
    names_its_mode(mode, null);
    if (null.exit_code != 0 || null.text != "readable\n" || (null.sandbox && null.sandbox->denied))
      violated("/dev/null writable", name, "writing /dev/null or reading a file failed", null);

    const detail::outcome plain = observe(executor, mode, "exit 3");
    if (plain.exit_code != 3 || !plain.sandbox || plain.sandbox->denied || plain.sandbox->runner_failed)
      violated("denial dialect recognized", name, "a plain failure is not the command's own exit 3", plain);

    denied_write(mode, outside.path() / "f");
  }
  denied_write(sandbox_mode::read_only, workspace.path() / "f");
  denied_write(sandbox_mode::read_only, in_tmp);
  denied_write(sandbox_mode::read_only, workspace.path() / "g", true);

  const detail::outcome inside =
      observe(executor, sandbox_mode::workspace_write,
              "echo x > \"$WS/f\" && mkdir \"$WS/d\" && mv \"$WS/f\" \"$WS/d/g\" && echo y > \"$T\" && cat \"$T\"");
  names_its_mode(sandbox_mode::workspace_write, inside);
  // /tmp may be private to the command (bwrap's tmpfs): read it back inside.
  if (inside.exit_code != 0 || inside.text != "y\n" || detail::read_text(workspace.path() / "d" / "g") != "x\n")
    violated("writes denied per mode", "workspace-write", "writing the workspace and /tmp failed", inside);

  // The shell's own working directory: relative paths, from inside the workspace.
  const std::filesystem::path sub = workspace.path() / "sub";
  const detail::outcome relative =
      observe(executor, sandbox_mode::workspace_write,
              "echo x > rel && mkdir reldir && mv rel reldir/moved && cat reldir/moved", false, sub);
  if (relative.exit_code != 0 || relative.text != "x\n" || detail::read_text(sub / "reldir" / "moved") != "x\n")
    violated("the shell's own working directory", "workspace-write",
             fmt::format("a relative write from {} (inside the workspace) failed", sub.string()), relative);
  refused("the shell's own working directory", "read-only",
          observe(executor, sandbox_mode::read_only, "echo x > rel-ro", false, sub), sub / "rel-ro", "");

  // A kill is prompt: well within the grace, which a swallowed SIGTERM waits out.
  const milliseconds prompt = config.kill_grace / 2;
  for (sandbox_mode mode : {sandbox_mode::read_only, sandbox_mode::workspace_write}) {
    const std::string name = fmt::format("{}", mode);
    const auto began = clock::now();
    run_result run = executor.run(
        executor.resolve({.command = "sleep 30", .timeout = milliseconds(200), .env = env, .mode = mode}));
    const auto took = std::chrono::duration_cast<milliseconds>(clock::now() - began);
    detail::outcome seen{run.exit_code, run.out.text + run.err.text, run.sandbox, run.timed_out};
    if (!run.timed_out) violated("a kill is prompt", name, "a 200 ms timeout did not fire", seen);
    if (took > milliseconds(200) + prompt)
      violated("a kill is prompt", name,
               fmt::format("a 200 ms timeout returned after {} ms, not within {} ms of a {} ms grace: the SIGTERM "
                           "did not end the command",
                           took.count(), prompt.count(), config.kill_grace.count()),
               seen);
  }
  {
    const task_id task = executor.start(
        executor.resolve({.command = "echo started; sleep 30", .env = env, .mode = sandbox_mode::read_only}));
    // Killed once the command runs: a kill that beat the runner's own start
    // would say nothing about what the runner does with it.
    std::string printed;
    for (const auto until = clock::now() + std::chrono::seconds(10);
         printed.find("started") == std::string::npos && clock::now() < until;) {
      printed += executor.read_output(task).delta;
      std::this_thread::sleep_for(milliseconds(10));
    }
    const auto began = clock::now();
    (void)executor.kill(task);
    const task_snapshot done = executor.wait(task);
    const auto took = std::chrono::duration_cast<milliseconds>(clock::now() - began);
    if (took > prompt)
      violated("a kill is prompt", "read-only, background",
               fmt::format("a killed task settled after {} ms, not within {} ms of a {} ms grace", took.count(),
                           prompt.count(), config.kill_grace.count()),
               detail::outcome{done.exit_code, "", done.sandbox, false});
  }

  // Protected paths: every .git in the workspace stays read-only.
  for (const auto* repository : {".git", "nested/.git"}) {
    std::filesystem::create_directories(workspace.path() / repository);
    detail::write_text(workspace.path() / repository / "config", "[core]\n\trepositoryformatversion = 0\n");
  }
  for (const auto* target : {".git/config", "nested/.git/config", "nested/.git/planted"}) {
    const std::filesystem::path path = workspace.path() / target;
    const std::string before = std::filesystem::exists(path) ? detail::read_text(path) : "";
    const detail::outcome seen = observe(executor, sandbox_mode::workspace_write,
                                         fmt::format("echo x >> \"{}\"", path.string()));
    const bool unchanged = before.empty() ? !std::filesystem::exists(path) : detail::read_text(path) == before;
    if (full(seen) || (seen.exit_code != 0 && unchanged))
      refused("protected paths stay read-only", "workspace-write", seen, path, before);
    else
      not_checked("protected paths stay read-only",
                  fmt::format("workspace-write is `partial` here and {} stayed writable", target));
  }

  // Read-only paths: a spill file under the workspace is readable and writable by none.
  {
    executor_config spilling = config;
    const std::filesystem::path parent = workspace.path() / "spill-parent";
    std::filesystem::create_directory(parent);
    std::filesystem::permissions(parent, std::filesystem::perms::owner_all);
    spilling.spill_parent = parent;
    executor_type spill_executor(spilling, own);
    try {
      run_result big = spill_executor.run(spill_executor.resolve(
          {.command = "head -c 70000 /dev/zero", .env = env, .mode = sandbox_mode::workspace_write}));
      if (!big.out.spill_path) {
        not_checked("read-only paths", "a 70000-byte stdout made no spill file");
      } else {
        const std::filesystem::path spill = *big.out.spill_path;
        const std::string before = detail::read_text(spill);
        const detail::outcome read =
            observe(spill_executor, sandbox_mode::workspace_write, fmt::format("wc -c < \"{}\"", spill.string()));
        if (read.exit_code != 0 || read.text != "70000\n")
          violated("read-only paths", "workspace-write", "a spill file is not readable by a later command", read);
        const detail::outcome write = observe(spill_executor, sandbox_mode::workspace_write,
                                              fmt::format("echo x >> \"{}\"", spill.string()));
        refused("read-only paths", "workspace-write", write, spill, before);
      }
    } catch (const sandbox_unavailable& error) {
      // Refusing the spawn is what a policy that cannot bind it read-only does.
      not_checked("read-only paths", fmt::format("the spawn was refused: {}", error.what()));
    }
  }

  // Network: `full` changes nothing; `none` keeps the command off the host.
  const std::string connect = "exec 3<>/dev/tcp/127.0.0.1/$PORT && echo connected";
  {
    const detail::outcome open = observe(executor, sandbox_mode::read_only, connect);
    if (open.exit_code != 0 || open.text.find("connected") == std::string::npos)
      violated("network", "read-only, network full", "the host's loopback is unreachable under `full`", open);
  }
  {
    executor_config offline = config;
    offline.sandbox.network = network_access::none;
    executor_type offline_executor(offline, own);
    try {
      const detail::outcome closed = observe(offline_executor, sandbox_mode::read_only, connect);
      const bool connected = closed.text.find("connected") != std::string::npos;
      if (connected && full(closed))
        violated("network", "read-only, network none", "a confined command reached the host's loopback", closed);
      else if (connected)
        not_checked("network", "the network is `partial` here and the host's loopback was reachable");
      if (!connected && closed.sandbox && closed.sandbox->denied)
        violated("network", "read-only, network none", "a refused connection was reported as a file denial", closed);
      const detail::outcome free = observe(offline_executor, sandbox_mode::danger_full_access, connect);
      if (free.text.find("connected") == std::string::npos)
        violated("network", "danger-full-access, network none", "danger-full-access did not ignore the knob", free);
    } catch (const sandbox_unavailable& error) {
      not_checked("network", fmt::format("`none` cannot be confined here: {}", error.what()));
    }
  }

  const detail::outcome free = observe(executor, sandbox_mode::danger_full_access,
                                       "echo x > \"$OUT/free\" && echo 'Permission denied' >&2 && exit 1");
  names_its_mode(sandbox_mode::danger_full_access, free);
  if (!std::filesystem::exists(outside.path() / "free"))
    violated("writes denied per mode", "danger-full-access", "an unconfined write was denied", free);
  if (free.sandbox && free.sandbox->denied)
    violated("denial dialect recognized", "danger-full-access", "an unconfined failure was reported as denied",
             free);
  return result;
}

}  // namespace bashexec::laws
