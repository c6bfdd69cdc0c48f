// detail/engine/resolve: a request becomes a spec (contract 1) — defaults,
// caps and validation, as a pure function of the request and the executor's
// fixed facts, so it can be read and tested without an executor.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/core.h>

#include "bashexec/config.hpp"
#include "bashexec/errors.hpp"
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
inline exec_spec resolve(exec_request request, const resolve_context& context) {
  if (request.command.empty()) throw std::invalid_argument("command must not be empty");
  if (request.timeout && request.timeout->count() <= 0)
    throw std::invalid_argument(fmt::format("timeout must be positive, got {} ms", request.timeout->count()));
  if (request.stdout_max_bytes && *request.stdout_max_bytes == 0)
    throw std::invalid_argument("stdout_max_bytes must be positive, got 0");
  if (request.workdir && request.workdir->empty()) throw std::invalid_argument("workdir must not be empty");
  if (request.mode) require_known_mode(*request.mode, "mode");
  const executor_config& config = context.config;
  exec_spec spec;
  spec.command = std::move(request.command);
  spec.workdir = request.workdir ? context.cwd / *request.workdir : context.cwd;  // an absolute workdir replaces cwd
  spec.timeout = std::min(request.timeout.value_or(config.default_timeout), config.max_timeout);
  spec.stdout_max_bytes = request.stdout_max_bytes.value_or(config.output_cap);
  spec.stop = std::move(request.stop);
  spec.stdin_data = std::move(request.stdin_data);
  spec.env = std::move(request.env);
  spec.owner = std::move(request.owner);
  spec.mode = request.mode ? request.mode : context.default_mode;
  spec.progress = std::move(request.progress);
  return spec;
}

/// The process's working directory, the default `cwd` of an executor.
inline std::filesystem::path current_directory() {
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  if (ec) throw infrastructure_error(fmt::format("getcwd: {}", ec.message()));
  return cwd;
}

}  // namespace bashexec::detail
