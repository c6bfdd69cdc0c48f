// confinement/unconfined: no confinement at all — the local executor's
// choice, and what `danger-full-access` means under a sandboxing executor.
#pragma once

#include <string_view>

#include "bashexec/confinement.hpp"

namespace bashexec {

struct unconfined {
  static constexpr bool confines = false;
  static constexpr bool needs_pre_exec = false;
  static constexpr std::string_view name = "unconfined";

  using config = no_config;

  explicit unconfined(const sandbox_config&, const config& = {}) {}
};

}  // namespace bashexec
