// The bodies of detail/engine/shell_state_capture.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/shell_state_capture.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/engine/environment.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::string state_wrapper(int fd) {
  // Builtins by `builtin`, default word splitting: a command's functions
  // named printf or pwd, or its IFS, do not change the record. A command
  // can still spoil its own record (a function named `builtin`, a closed
  // descriptor, an EXIT trap of its own): it is then dropped, nothing more.
  return fmt::format(
      "trap '__bashexec_status=$?; builtin unset IFS; "
      "{{ builtin printf \"bashexec-state-1\\0%s\\0\" \"$(builtin pwd -P 2>/dev/null)\"; "
      "for __bashexec_name in $(builtin compgen -e); do "
      "builtin printf \"%s=%s\\0\" \"$__bashexec_name\" \"${{!__bashexec_name}}\"; done; "
      "builtin printf \"end\\0\"; }} >&{0} 2>/dev/null; builtin exit \"$__bashexec_status\"' EXIT\n"
      "__bashexec_command=$1; shift; builtin eval -- \"$__bashexec_command\"",
      fd);
}

BASHEXEC_DECL std::optional<state_record> parse_state_record(std::string_view bytes, std::string& why) {
  constexpr std::string_view magic = "bashexec-state-1";
  auto next = [&bytes](std::string_view& field) {
    const auto nul = bytes.find('\0');
    if (nul == std::string_view::npos) return false;
    field = bytes.substr(0, nul);
    bytes.remove_prefix(nul + 1);
    return true;
  };
  std::string_view field;
  if (bytes.empty()) {
    why = "the shell wrote no state (its exit trap was replaced, or its descriptor closed)";
    return std::nullopt;
  }
  if (!next(field) || field != magic) {
    why = "the state record is malformed";
    return std::nullopt;
  }
  state_record record;
  if (!next(field)) {
    why = "the state record is truncated";
    return std::nullopt;
  }
  record.cwd = std::string(field);
  for (;;) {
    if (!next(field)) {
      why = "the state record is truncated";
      return std::nullopt;
    }
    if (field == "end") break;
    const auto equals = field.find('=');
    if (equals == 0 || equals == std::string_view::npos) {
      why = "the state record is malformed";
      return std::nullopt;
    }
    record.env.emplace_back(std::string(field.substr(0, equals)), std::string(field.substr(equals + 1)));
  }
  if (!bytes.empty()) {
    why = "the state record was written to more than once";
    return std::nullopt;
  }
  return record;
}

BASHEXEC_DECL bool is_uncarried_name(std::string_view name) {
  constexpr std::string_view never[] = {"PWD",        "OLDPWD",      "SHLVL",      "_",        "HTTP_PROXY",
                                        "HTTPS_PROXY", "ALL_PROXY",  "NO_PROXY",   "http_proxy", "https_proxy",
                                        "all_proxy",   "no_proxy",   "FTP_PROXY",  "ftp_proxy"};
  if (std::find(std::begin(never), std::end(never), name) != std::end(never)) return true;
  if (name.substr(0, 9) == "BASHEXEC_" || name.substr(0, 11) == "__bashexec_") return true;
  return std::ranges::any_of(non_interactive_env, [name](const auto& kv) { return kv.first == name; });
}

BASHEXEC_DECL shell_state carried_state(const state_record& record, const std::vector<std::string>& baseline,
                                        const environment_scrub& scrub) {
  std::map<std::string_view, std::string_view> start;
  for (const std::string& entry : baseline) {
    const auto equals = entry.find('=');
    const std::string_view view(entry);
    start.emplace(view.substr(0, equals), equals == std::string::npos ? std::string_view() : view.substr(equals + 1));
  }
  shell_state state;
  state.cwd = record.cwd;
  std::map<std::string_view, bool> seen;
  for (const auto& [name, value] : record.env) {
    seen[name] = true;
    if (is_uncarried_name(name) || is_credential_name(name, scrub)) continue;
    const auto it = start.find(name);
    if (it == start.end() || it->second != value) state.env[name] = value;
  }
  for (const auto& [name, value] : start)
    if (!seen.count(name) && !is_uncarried_name(name)) state.unset.emplace_back(name);
  return state;
}

BASHEXEC_DECL unique_fd make_state_file(const std::filesystem::path& directory) {
  unique_fd file(::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!file) throw_syscall(fmt::format("open O_TMPFILE in {} (the shell's state)", directory.string()));
  if (file.get() <= 2) {
    const int moved = ::fcntl(file.get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) throw_syscall("fcntl(F_DUPFD_CLOEXEC)");
    file.reset(moved);
  }
  return file;
}

BASHEXEC_DECL std::optional<shell_state> read_state_file(int file, std::size_t limit,
                                                         const std::vector<std::string>& baseline,
                                                         const environment_scrub& scrub, std::string& why) {
  struct stat info {};
  if (::fstat(file, &info) != 0) {
    why = fmt::format("the state file could not be read ({})", std::strerror(errno));
    return std::nullopt;
  }
  if (static_cast<std::uint64_t>(info.st_size) > limit) {
    why = fmt::format("the shell's state ({} bytes) exceeds the limit of {} bytes", info.st_size, limit);
    return std::nullopt;
  }
  std::string bytes(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::pread(file, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  auto record = parse_state_record(bytes, why);
  if (!record) return std::nullopt;
  return carried_state(*record, baseline, scrub);
}

}  // namespace bashexec::detail
