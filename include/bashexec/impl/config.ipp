// The bodies of config.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/config.hpp"

#include <stdexcept>

#include <fmt/core.h>

namespace bashexec {

namespace detail {

BASHEXEC_DECL void require_positive(std::chrono::milliseconds value, std::string_view field) {
  if (value.count() <= 0)
    throw std::invalid_argument(fmt::format("{} must be positive, got {} ms", field, value.count()));
  constexpr long long most = 2147483647;
  if (value.count() > most)
    throw std::invalid_argument(fmt::format("{} must be at most {} ms, got {} ms", field, most, value.count()));
}

BASHEXEC_DECL void require_known_mode(sandbox_mode mode, std::string_view field) {
  for (auto known : sandbox_modes)
    if (mode == known) return;
  throw std::invalid_argument(
      fmt::format("{} holds {}, which is not a sandbox mode (read-only, workspace-write or danger-full-access)",
                  field, static_cast<int>(mode)));
}

}  // namespace detail

BASHEXEC_DECL void validate(const executor_config& config) {
  detail::require_positive(config.default_timeout, "default_timeout");
  detail::require_positive(config.max_timeout, "max_timeout");
  detail::require_positive(config.kill_grace, "kill_grace");
  detail::require_positive(config.drain_timeout, "drain_timeout");
  detail::require_positive(config.sandbox.probe_timeout, "sandbox.probe_timeout");
  if (config.output_cap == 0) throw std::invalid_argument("output_cap must be positive, got 0");
  detail::require_positive(config.terminal.quiet, "terminal.quiet");
  detail::require_positive(config.terminal.max_interval, "terminal.max_interval");
  detail::require_positive(config.terminal.write_timeout, "terminal.write_timeout");
  if (config.terminal.max_interval < config.terminal.quiet)
    throw std::invalid_argument("terminal.max_interval must be at least terminal.quiet");
  if (config.shell_state_limit == 0) throw std::invalid_argument("shell_state_limit must be positive, got 0");
  if (config.terminal.prompt_bytes == 0) throw std::invalid_argument("terminal.prompt_bytes must be positive, got 0");
  if (config.terminal.term.empty() || config.terminal.term.find_first_of("=\n") != std::string::npos)
    throw std::invalid_argument("terminal.term must be a terminal type name (no '=' or newline)");
  for (const auto* rules : {&config.scrub.name_fragments, &config.scrub.name_words})
    for (const std::string& rule : *rules)
      if (rule.empty())
        throw std::invalid_argument(fmt::format("scrub.{} must not hold an empty entry (it would match every name)",
                                                rules == &config.scrub.name_words ? "name_words" : "name_fragments"));
  if (config.shell.empty()) throw std::invalid_argument("shell must not be empty");
  if (!config.shell.is_absolute())
    throw std::invalid_argument(fmt::format("shell {} must be an absolute path (the host never searches $PATH for it)",
                                            config.shell.string()));
  if (config.spill_budget_bytes == 0) throw std::invalid_argument("spill_budget_bytes must be positive, got 0");
  if (config.retention.max_tasks == 0) throw std::invalid_argument("retention.max_tasks must be positive, got 0");
  if (config.retention.max_bytes == 0) throw std::invalid_argument("retention.max_bytes must be positive, got 0");
  detail::require_positive(config.retention.max_age, "retention.max_age");
  if (config.sandbox.default_mode) detail::require_known_mode(*config.sandbox.default_mode, "sandbox.default_mode");
  for (const auto& path : config.sandbox.protected_paths) {
    if (path.empty() || path.is_absolute() || path.has_root_path())
      throw std::invalid_argument(fmt::format(
          "sandbox.protected_paths must hold paths relative to the workspace root, got \"{}\"", path.string()));
    for (const auto& part : path)
      if (part == "..")
        throw std::invalid_argument(fmt::format(
            "sandbox.protected_paths must stay inside the workspace root (no \"..\"), got \"{}\"", path.string()));
    if (path.lexically_normal() == ".")
      throw std::invalid_argument(fmt::format(
          "sandbox.protected_paths entry \"{}\" names the whole workspace; use read-only mode instead",
          path.string()));
  }
  if (config.sandbox.protected_scan_limit == 0)
    throw std::invalid_argument("sandbox.protected_scan_limit must be positive, got 0");
  if (proxies_network(config.sandbox.network)) {
    config.sandbox.egress.validate();
    if (!config.sandbox.gateway)
      throw std::invalid_argument(
          "sandbox.gateway: sandbox.network = allowlist needs an egress gateway to serve the proxy "
          "(network::asio_egress_gateway in <bashexec/network/egress_proxy.hpp>)");
  } else if (const auto restriction = detail::egress_restriction(config.sandbox.egress)) {
    // A restriction nothing enforces reads as a restricted network while
    // every confined command has the one `network` gives it (issue 43).
    throw std::invalid_argument(fmt::format(
        "sandbox.egress.{}: applies only with sandbox.network = allowlist (this configuration gives confined "
        "commands the network \"{}\"); set sandbox.network = network_access::allowlist, or leave it empty",
        *restriction, config.sandbox.network));
  }
  auto require_positive_limit = [](const std::optional<std::uint64_t>& value, std::string_view field) {
    if (value && *value == 0) throw std::invalid_argument(fmt::format("limits.{} must be positive, got 0", field));
  };
  require_positive_limit(config.limits.max_processes, "max_processes");
  require_positive_limit(config.limits.max_address_space_bytes, "max_address_space_bytes");
  require_positive_limit(config.limits.max_file_size_bytes, "max_file_size_bytes");
  require_positive_limit(config.limits.max_open_files, "max_open_files");
  switch (config.containment) {
    case process_containment::automatic:
    case process_containment::process_group:
    case process_containment::cgroup: break;
    default:
      throw std::invalid_argument(fmt::format("containment must be automatic, process_group or cgroup, got {}",
                                              static_cast<int>(config.containment)));
  }
  if (config.cgroup_parent) {
    if (config.containment == process_containment::process_group)
      throw std::invalid_argument(
          "cgroup_parent is not used with containment = process_containment::process_group");
    if (!config.cgroup_parent->is_absolute())
      throw std::invalid_argument(
          fmt::format("cgroup_parent must be an absolute path, got \"{}\"", config.cgroup_parent->string()));
  }
  if (config.limits.max_cpu_time && config.limits.max_cpu_time->count() <= 0)
    throw std::invalid_argument(
        fmt::format("limits.max_cpu_time must be positive, got {} s", config.limits.max_cpu_time->count()));
}

}  // namespace bashexec
