// under_launcher: an out-of-tree confinement policy (docs/extending.md). Every
// confined command runs under an operator-chosen launcher — `prlimit`,
// `nice`, `setpriv`, `ionice`, … — inside bubblewrap, which still decides
// the file effects of the mode. It uses only bashexec's installed headers,
// owns its configuration, and passes the confinement laws.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <bashexec/confinement.hpp>
#include <bashexec/confinement/bwrap.hpp>
#include <bashexec/errors.hpp>

namespace example {

class under_launcher {
 public:
  // What the executor reads at compile time.
  static constexpr bool confines = true;         // it confines (prepare is called)
  static constexpr bool needs_pre_exec = false;  // no hook in the child: any spawn policy will do
  static constexpr std::string_view name = "under_launcher";
  // Optional: what a chain prints when this candidate cannot work.
  static constexpr std::string_view remedy = "install util-linux and bubblewrap";

  // Its own knobs. The executor validates them at construction.
  struct config {
    // The launcher and its arguments; the confined command follows them.
    std::vector<std::string> launcher{"prlimit", "--nofile=256"};
    // How to reach bwrap, which enforces the mode.
    bashexec::bwrap::config bwrap;

    void validate() const {
      if (launcher.empty() || launcher.front().empty())
        throw std::invalid_argument("under_launcher.launcher must name a program");
      bwrap.validate();
    }
  };

  // Shared knobs (protected paths, network) go to bwrap as they are.
  under_launcher(const bashexec::sandbox_config& shared, const config& own)
      : launcher_(own.launcher), inner_(shared, own.bwrap) {}

  // `plan.argv` starts as {shell, "-c", command}. Put the launcher in front,
  // then let bwrap wrap the whole line: the launcher runs inside the sandbox.
  bashexec::confined_launch prepare(bashexec::sandbox_mode mode, const std::filesystem::path& root,
                                    bashexec::launch_plan& plan) const {
    plan.argv.insert(plan.argv.begin(), launcher_.begin(), launcher_.end());
    return inner_.prepare(mode, root, plan);
  }

  // A launcher that cannot start the command fails like a shell would
  // ("prlimit: failed to execute …"): that is a runner failure, not the
  // command's. Everything else is bwrap's call.
  std::optional<std::string> runner_failure(bashexec::confined_launch& launch, std::string_view err,
                                            std::string_view out) const {
    const std::string prefix = std::filesystem::path(launcher_.front()).filename().string() + ": failed to execute";
    if (err.find(prefix) != std::string_view::npos) return std::string(err.substr(0, err.find('\n')));
    return inner_.runner_failure(launch, err, out);
  }

  // Denials read like bwrap's (a read-only mount: EROFS).
  bool is_denial(std::string_view err) const { return inner_.is_denial(err); }

 private:
  std::vector<std::string> launcher_;
  bashexec::bwrap inner_;
};

static_assert(bashexec::confining_policy<under_launcher>);

}  // namespace example
