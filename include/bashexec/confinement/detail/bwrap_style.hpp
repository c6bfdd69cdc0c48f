// confinement/detail/bwrap_style: the common part of the confinements that run the
// command under a bwrap-compatible runner (`bwrap`, `runner_command`): what
// they read from the shared configuration, what they promise (a pid
// namespace, full enforcement, no pre-exec hook), and how a launch plan's
// argv is wrapped in the profile of confinement/detail/bwrap_profile.hpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "bashexec/config.hpp"
#include "bashexec/confinement.hpp"
#include "bashexec/confinement/detail/bwrap_profile.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/detail/trust/find_program.hpp"
#include "bashexec/launch.hpp"

namespace bashexec::detail {

class bwrap_style {
 public:
  static constexpr bool confines = true;
  static constexpr bool needs_pre_exec = false;

 protected:
  explicit bwrap_style(const sandbox_config& shared)
      : protected_(shared.protected_paths), scan_limit_(shared.protected_scan_limit), network_(shared.network) {}

  /// The launch every bwrap-style spawn starts from: `mode` at full
  /// enforcement, in the profile's pid namespace (`--unshare-pid`). Refuses
  /// danger-full-access, which is never confined (`policy` names the caller).
  static confined_launch confined_launch_for(std::string_view policy, sandbox_mode mode);

  /// Rewrites `plan.argv` as `runner… <profile> after_profile… -- <plan.argv…>`.
  void wrap(launch_plan& plan, sandbox_mode mode, const std::filesystem::path& root, std::vector<std::string> runner,
            std::vector<std::string> after_profile = {}) const;

  /// Throws `sandbox_unavailable` when `program_refusal` (detail/trust/find_program.hpp)
  /// says why not; `what`
  /// names the program in the message, `remedy` says how to fix it.
  static void require_trusted(const program_lookup& program, std::string_view policy, sandbox_mode mode,
                              const std::filesystem::path& root, std::string_view what, std::string_view remedy);

 private:
  std::vector<std::filesystem::path> protected_;
  std::size_t scan_limit_;
  network_access network_;
};

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/confinement/detail/impl/bwrap_style.ipp"
#endif
