// detail/engine/resolve: a request becomes a spec (contract 1) — defaults,
// caps and validation, as a pure function of the request and the executor's
// fixed facts, so it can be read and tested without an executor.
#pragma once

#include <filesystem>
#include <optional>

#include "bashexec/config.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/request.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec::detail {

/// What `resolve` reads besides the request: fixed for an executor's life.
struct resolve_context {
  const executor_config& config;
  /// The absolute directory a relative (or absent) workdir is taken from.
  const std::filesystem::path& cwd;
  /// Stamped on a request without a mode; empty for an executor that never
  /// confines.
  std::optional<sandbox_mode> default_mode;
};

/// Applies defaults and caps (contract 1). Throws std::invalid_argument
/// naming the offending field.
BASHEXEC_DECL exec_spec resolve(exec_request request, const resolve_context& context);

/// The process's working directory, the default `cwd` of an executor.
BASHEXEC_DECL std::filesystem::path current_directory();

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/engine/impl/resolve.ipp"
#endif
