// The bodies of detail/engine/verdict.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/verdict.hpp"

#include <fmt/core.h>

#include "bashexec/detail/text_match.hpp"

namespace bashexec::detail {

BASHEXEC_DECL sandbox_unavailable runner_unavailable(std::string_view confinement_name, const sandbox_info& info,
                                                     std::string_view reason) {
  return sandbox_unavailable(info.mode, fmt::format("{} sandbox runner failed under {} mode: {}", confinement_name,
                                                    info.mode, first_line(reason)));
}

}  // namespace bashexec::detail
