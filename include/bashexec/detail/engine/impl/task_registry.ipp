// The bodies of detail/engine/task_registry.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/task_registry.hpp"

#include <charconv>
#include <system_error>

#include <fmt/core.h>

namespace bashexec::detail {

BASHEXEC_DECL std::string duration_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 3600000 == 0) return fmt::format("{} h", ms / 3600000);
  if (ms % 60000 == 0) return fmt::format("{} min", ms / 60000);
  if (ms % 1000 == 0) return fmt::format("{} s", ms / 1000);
  return fmt::format("{} ms", ms);
}

BASHEXEC_DECL std::string bytes_text(std::uint64_t bytes) {
  if (bytes % (std::uint64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

BASHEXEC_DECL std::string retention_text(const task_retention& r) {
  return fmt::format(
      "settled tasks are kept for at most {}, at most the {} that settled last, and at most {} of their output in "
      "memory",
      duration_text(r.max_age), r.max_tasks, bytes_text(r.max_bytes));
}

BASHEXEC_DECL std::optional<std::uint64_t> serial_of(const task_id& id) {
  std::string_view text = id.value();
  constexpr std::string_view prefix = "bash-";
  if (!text.starts_with(prefix)) return std::nullopt;
  text.remove_prefix(prefix.size());
  if (text.empty() || text.front() < '1' || text.front() > '9') return std::nullopt;
  std::uint64_t serial = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), serial);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return serial;
}

}  // namespace bashexec::detail
