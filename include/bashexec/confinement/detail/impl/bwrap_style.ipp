// The bodies of confinement/detail/bwrap_style.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/confinement/detail/bwrap_style.hpp"

#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "bashexec/confinement.hpp"
#include "bashexec/confinement/detail/bwrap_profile.hpp"
#include "bashexec/errors.hpp"
#include "bashexec/launch.hpp"

namespace bashexec::detail {

BASHEXEC_DECL confined_launch bwrap_style::confined_launch_for(std::string_view policy, sandbox_mode mode) {
  refuse_unconfined_mode(policy, mode);
  confined_launch launch;
  launch.pid_namespace = true;
  launch.info.mode = mode;
  launch.info.level = enforcement::full;
  return launch;
}

BASHEXEC_DECL void bwrap_style::wrap(launch_plan& plan, sandbox_mode mode, const std::filesystem::path& root,
                                     std::vector<std::string> runner, std::vector<std::string> after_profile) const {
  auto profile = bwrap_profile_args(mode, root, protected_, network_, plan.read_only_paths, scan_limit_);
  runner.insert(runner.end(), std::make_move_iterator(profile.begin()), std::make_move_iterator(profile.end()));
  runner.insert(runner.end(), std::make_move_iterator(after_profile.begin()),
                std::make_move_iterator(after_profile.end()));
  runner.emplace_back("--");
  runner.insert(runner.end(), std::make_move_iterator(plan.argv.begin()), std::make_move_iterator(plan.argv.end()));
  plan.argv = std::move(runner);
}

BASHEXEC_DECL void bwrap_style::require_trusted(const program_lookup& program, std::string_view policy,
                                                sandbox_mode mode, const std::filesystem::path& root,
                                                std::string_view what, std::string_view remedy) {
  if (std::string why = program_refusal(program, root); !why.empty())
    throw sandbox_unavailable(mode, fmt::format("{} cannot confine {} mode: {}: {}; {}", policy, mode, what, why, remedy));
}

}  // namespace bashexec::detail
