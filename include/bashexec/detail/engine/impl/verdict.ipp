// The bodies of detail/engine/verdict.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/verdict.hpp"

#include <fmt/core.h>

#include "bashexec/detail/text/text_match.hpp"
#include "bashexec/launch.hpp"

namespace bashexec::detail {

BASHEXEC_DECL sandbox_unavailable runner_unavailable(std::string_view confinement_name, const sandbox_info& info,
                                                     std::string_view reason) {
  return sandbox_unavailable(info.mode, fmt::format("{} sandbox runner failed under {} mode: {}", confinement_name,
                                                    info.mode, first_line(reason)));
}

BASHEXEC_DECL spawn_failure classify_spawn_failure(bool confined) {
  try {
    throw;
  } catch (const pre_exec_failed& e) {
    return {e.what(), confined};
  } catch (const infrastructure_error& e) {
    return {e.what(), false};
  }
}

}  // namespace bashexec::detail
