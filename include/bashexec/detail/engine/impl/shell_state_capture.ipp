// The bodies of detail/engine/shell_state_capture.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/engine/shell_state_capture.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <map>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include "bashexec/detail/engine/environment.hpp"

namespace bashexec::detail {

BASHEXEC_DECL std::string state_wrapper(int fd) {
  // Builtins by `builtin`, default word splitting: a command's functions
  // named printf, pwd or export, or its IFS, do not change the record. A
  // command can still spoil its own record (a function named `builtin`, a
  // closed descriptor, an EXIT trap of its own): it is then dropped,
  // nothing more. No command substitution and no loop over the names: a
  // subshell forks (about 0.7 ms a call) and a loop of expansions costs
  // more than the whole call; `export -p` lists every exported variable,
  // quoted by bash, in one write.
  return fmt::format(
      "trap '__bashexec_status=$?; "
      "{{ builtin printf \"bashexec-state-2\\0\"; builtin pwd -P 2>/dev/null; builtin printf \"\\0\"; "
      "builtin export -p; builtin printf \"\\0end\\0\"; }} >&{0} 2>/dev/null; "
      "builtin exit \"$__bashexec_status\"' EXIT\n"
      "__bashexec_command=$1; shift; builtin eval -- \"$__bashexec_command\"",
      fd);
}

namespace {

bool is_shell_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::ranges::all_of(name, [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); });
}

/// A value as `export -p` quotes it, taken whole from `text` (one line):
/// "..." (a backslash before " \ $ `) or $'...' (ANSI-C escapes). False
/// for anything else, or anything after the closing quote.
bool unquote_value(std::string_view text, std::string& value) {
  value.clear();
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    text = text.substr(1, text.size() - 2);
    for (std::size_t i = 0; i < text.size(); ++i) {
      char c = text[i];
      if (c == '"') return false;
      if (c == '\\' && i + 1 < text.size() && std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos)
        c = text[++i];
      value += c;
    }
    return true;
  }
  if (text.size() < 3 || !text.starts_with("$'") || text.back() != '\'') return false;
  text = text.substr(2, text.size() - 3);
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  auto append_utf8 = [&value](std::uint32_t code) {
    if (code < 0x80) {
      value += static_cast<char>(code);
    } else if (code < 0x800) {
      value += static_cast<char>(0xC0 | (code >> 6));
      value += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      value += static_cast<char>(0xE0 | (code >> 12));
      value += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      value += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      value += static_cast<char>(0xF0 | (code >> 18));
      value += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      value += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      value += static_cast<char>(0x80 | (code & 0x3F));
    }
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'') return false;
    if (c != '\\') {
      value += c;
      continue;
    }
    if (++i == text.size()) return false;
    const char e = text[i];
    switch (e) {
      case 'a': value += '\a'; break;
      case 'b': value += '\b'; break;
      case 'e':
      case 'E': value += '\x1b'; break;
      case 'f': value += '\f'; break;
      case 'n': value += '\n'; break;
      case 'r': value += '\r'; break;
      case 't': value += '\t'; break;
      case 'v': value += '\v'; break;
      case '\\':
      case '\'':
      case '"':
      case '?': value += e; break;
      case 'c':
        if (++i == text.size()) return false;
        value += static_cast<char>(text[i] & 0x1F);
        break;
      case 'x':
      case 'u':
      case 'U': {
        const std::size_t most = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::uint32_t code = 0;
        std::size_t digits = 0;
        while (digits < most && i + 1 < text.size() && hex(text[i + 1]) >= 0) code = code * 16 + hex(text[++i]), ++digits;
        if (digits == 0 || (e != 'x' && code > 0x10FFFF)) return false;
        if (e == 'x') value += static_cast<char>(code);
        else append_utf8(code);
        break;
      }
      default: {
        if (e < '0' || e > '7') return false;
        std::uint32_t code = static_cast<std::uint32_t>(e - '0');
        for (int digits = 1; digits < 3 && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '7'; ++digits)
          code = code * 8 + static_cast<std::uint32_t>(text[++i] - '0');
        value += static_cast<char>(code & 0xFF);
      }
    }
  }
  return true;
}

/// One line of `export -p`: `declare -FLAGS NAME[=VALUE]`, or in POSIX
/// mode `export [-FLAGS ]NAME[=VALUE]`. True with `name` empty for a line
/// that sets nothing in the environment (an array, which bash never
/// exports, or a name exported but never set).
bool parse_export_line(std::string_view line, std::string& name, std::string& value) {
  name.clear();
  std::string_view flags;
  if (line.starts_with("declare -")) {
    line.remove_prefix(9);
    const auto space = line.find(' ');
    if (space == std::string_view::npos) return false;
    flags = line.substr(0, space);
    line.remove_prefix(space + 1);
  } else if (line.starts_with("export ")) {
    line.remove_prefix(7);
    if (line.starts_with('-')) {
      const auto space = line.find(' ');
      if (space == std::string_view::npos) return false;
      flags = line.substr(1, space - 1);
      line.remove_prefix(space + 1);
    }
  } else {
    return false;
  }
  if (!std::ranges::all_of(flags, [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) return false;
  const auto equals = line.find('=');
  const std::string_view found = line.substr(0, equals);
  if (!is_shell_name(found)) return false;
  if (flags.find_first_of("aA") != std::string_view::npos || equals == std::string_view::npos) return true;
  if (!unquote_value(line.substr(equals + 1), value)) return false;
  name = found;
  return true;
}

}  // namespace

BASHEXEC_DECL std::optional<state_record> parse_state_record(std::string_view bytes, std::string& why) {
  constexpr std::string_view magic = "bashexec-state-2";
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
  std::string_view exports, end;
  if (!next(field) || !next(exports) || !next(end) || end != "end") {
    why = "the state record is truncated";
    return std::nullopt;
  }
  if (!bytes.empty()) {
    why = "the state record was written to more than once";
    return std::nullopt;
  }
  // `pwd -P` ends its line with a newline (a directory whose name ends in
  // one keeps its own); nothing at all when it failed.
  if (field.ends_with('\n')) field.remove_suffix(1);
  record.cwd = std::string(field);
  // Every line is one variable: bash quotes a newline in a value as $'\n'.
  std::string name, value;
  while (!exports.empty()) {
    const auto newline = exports.find('\n');
    if (newline == std::string_view::npos) {
      why = "the state record is malformed";
      return std::nullopt;
    }
    if (!parse_export_line(exports.substr(0, newline), name, value)) {
      why = "the state record is malformed";
      return std::nullopt;
    }
    exports.remove_prefix(newline + 1);
    if (!name.empty()) record.env.emplace_back(std::move(name), std::move(value));
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

BASHEXEC_DECL unique_fd make_state_file() {
  // A memory file, not O_TMPFILE on the spill directory's filesystem: on
  // ext4 the unnamed inode and its journaling cost about 0.1 ms a call.
  unique_fd file(::memfd_create("bashexec-shell-state", MFD_CLOEXEC));
  if (!file) throw_syscall("memfd_create (the shell's state)");
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
