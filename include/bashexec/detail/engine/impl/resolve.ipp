// The bodies of detail/engine/resolve.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/resolve.hpp"

#include <algorithm>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fmt/core.h>

#include "bashexec/detail/text/domain_name.hpp"
#include "bashexec/errors.hpp"

namespace bashexec::detail {

BASHEXEC_DECL exec_spec resolve(exec_request request, const resolve_context& context) {
  if (request.command.empty()) throw std::invalid_argument("command must not be empty");
  if (request.timeout && request.timeout->count() <= 0)
    throw std::invalid_argument(fmt::format("timeout must be positive, got {} ms", request.timeout->count()));
  if (request.stdout_max_bytes && *request.stdout_max_bytes == 0)
    throw std::invalid_argument("stdout_max_bytes must be positive, got 0");
  if (request.workdir && request.workdir->empty()) throw std::invalid_argument("workdir must not be empty");
  if (request.mode) require_known_mode(*request.mode, "mode");
  const executor_config& config = context.config;
  if (!request.network_grants.empty() && !proxies_network(config.sandbox.network))
    throw std::invalid_argument(fmt::format(
        "network_grants: names can be granted only under sandbox.network = allowlist, and this executor's is {}",
        config.sandbox.network));
  for (std::size_t i = 0; i < request.network_grants.size(); ++i)
    if (!network::domain_pattern::parse(request.network_grants[i]))
      throw std::invalid_argument(fmt::format("network_grants[{}]: \"{}\" is not a domain name or *.wildcard", i,
                                              request.network_grants[i]));
  if (request.terminal && (request.terminal->rows == 0 || request.terminal->columns == 0))
    throw std::invalid_argument(fmt::format("terminal: rows and columns must be positive, got {}x{}",
                                            request.terminal->rows, request.terminal->columns));
  if (request.terminal && request.stdin_data)
    throw std::invalid_argument(
        "stdin_data: a command on a terminal takes its input by write_input once it runs, not as stdin_data");
  for (std::size_t i = 0; i < request.env_unset.size(); ++i)
    if (request.env_unset[i].empty() || request.env_unset[i].find_first_of("=\0", 0, 2) != std::string::npos)
      throw std::invalid_argument(fmt::format("env_unset[{}]: \"{}\" is not a variable name", i, request.env_unset[i]));
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
  spec.network_grants = std::move(request.network_grants);
  spec.progress = std::move(request.progress);
  spec.terminal = request.terminal;
  spec.keep_stdin_open = request.keep_stdin_open;
  spec.capture_state = request.capture_state;
  spec.env_unset = std::move(request.env_unset);
  return spec;
}

BASHEXEC_DECL std::filesystem::path current_directory() {
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  if (ec) throw infrastructure_error(fmt::format("getcwd: {}", ec.message()));
  return cwd;
}

}  // namespace bashexec::detail
