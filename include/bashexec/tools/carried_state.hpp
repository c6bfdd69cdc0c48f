// tools/carried_state: how the tool layer carries a shell's working
// directory and exported environment from one `bash` call of a session to
// the next (docs/contract.md item 29, docs/shell-state.md). The executor
// stays stateless: it takes the state as request data (`workdir`, `env`,
// `env_unset`) and reports the final one (`run_result::final_state`); this
// header decides what a call starts from and what the session's next
// `shell-state` event holds.
//
// The rules, each a plain function below:
// - A carried directory is used only while it exists and lies inside the
//   session root; otherwise the call runs in the root, with a notice.
// - Loader and shell-startup variables (`LD_*`, `BASH_ENV`, `ENV`,
//   `PROMPT_COMMAND`, `PS4`, `SHELLOPTS`, `BASHOPTS`) remember the sandbox
//   mode of the call that set them; a wider call starts without them (and
//   its approval question says so), so what a person approves is what runs.
//   They come back for the calls after it.
// - A string that is not valid UTF-8 is not carried (the log holds text
//   only): such a variable is dropped, such a directory keeps the previous.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/core.h>

#include "bashexec/sandbox_mode.hpp"
#include "bashexec/session/session_events.hpp"
#include "bashexec/shell_state.hpp"
#include "bashexec/tools/utf8.hpp"

extern char** environ;  // the host's environment (needs_state_capture)

namespace bashexec {

/// What a session carries from call to call: its working directory, its
/// exported environment, both or (the default) neither.
struct state_carry {
  bool cwd = false;
  bool env = false;

  bool any() const noexcept { return cwd || env; }
  friend bool operator==(const state_carry&, const state_carry&) = default;
};

/// `cwd`, `env`, `cwd,env` (either order) or `none`; empty for anything else.
inline std::optional<state_carry> parse_state_carry(std::string_view text) {
  if (text == "none") return state_carry{};
  state_carry carry;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    if (part == "cwd" && !carry.cwd)
      carry.cwd = true;
    else if (part == "env" && !carry.env)
      carry.env = true;
    else
      return std::nullopt;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt;
  }
  if (!carry.any()) return std::nullopt;
  return carry;
}

/// The spelling parse_state_carry reads.
inline std::string to_string(state_carry carry) {
  if (carry.cwd && carry.env) return "cwd,env";
  if (carry.cwd) return "cwd";
  if (carry.env) return "env";
  return "none";
}

/// Variables that decide what the next shell or program loads before the
/// command itself runs: carried only into calls no wider than the one that
/// set them.
inline bool is_startup_variable(std::string_view name) noexcept {
  return name.starts_with("LD_") || name == "BASH_ENV" || name == "ENV" || name == "PROMPT_COMMAND" ||
         name == "PS4" || name == "SHELLOPTS" || name == "BASHOPTS";
}

/// What one call starts with, from the session's carried state.
struct carried_start {
  /// Where it runs: a carried directory inside the root, else empty (the
  /// call's own `workdir`, or the root).
  std::optional<std::filesystem::path> workdir;
  /// `workdir` relative to the root, for the `[cwd: …]` line; empty at the root.
  std::string shown_cwd;
  std::map<std::string, std::string> env;
  std::vector<std::string> unset;
  /// Startup variables this (wider) call starts without.
  std::vector<std::string> withheld;
  /// Why a carried directory was not used.
  std::optional<std::string> notice;
};

namespace detail {

/// `path` relative to `root` when it lies inside it (`.` for the root
/// itself); empty when it lies outside.
inline std::optional<std::filesystem::path> inside_root(const std::filesystem::path& path,
                                                        const std::filesystem::path& root) {
  std::error_code ec;
  const auto canonical_root = std::filesystem::weakly_canonical(root, ec);
  if (ec) return std::nullopt;
  const auto relative = path.lexically_relative(canonical_root);
  if (relative.empty() || *relative.begin() == "..") return std::nullopt;
  return relative;
}

}  // namespace detail

/// What a call under `mode` (empty: an executor that never confines) starts
/// with from `state`, carrying what `carry` says, in a session rooted at
/// `root` (absolute).
inline carried_start start_from(const shell_state_event& state, state_carry carry, const std::filesystem::path& root,
                                std::optional<sandbox_mode> mode) {
  carried_start start;
  if (carry.cwd && !state.cwd.empty()) {
    const std::filesystem::path cwd(state.cwd);
    std::error_code ec;
    const auto relative = detail::inside_root(cwd, root);
    if (!std::filesystem::is_directory(cwd, ec))
      start.notice = fmt::format("[cwd: {} no longer exists; this call runs in the session root]", state.cwd);
    else if (!relative)
      start.notice = fmt::format("[cwd: {} lies outside the session root; this call runs in the root]", state.cwd);
    else {
      start.workdir = cwd;
      if (*relative != ".") start.shown_cwd = relative->string();
    }
  }
  if (carry.env) {
    for (const auto& [name, value] : state.env) {
      const auto set_under = state.set_under.find(name);
      if (set_under != state.set_under.end() && mode && is_wider(*mode, set_under->second))
        start.withheld.push_back(name);
      else
        start.env.emplace(name, value);
    }
    start.unset = state.unset;
  }
  return start;
}

namespace detail {

/// The first word of a simple command that may change its shell's state:
/// a bash builtin or keyword (bash 5.2's `compgen -b` and `compgen -k`),
/// less those that change nothing a session carries (`true`, `false`, `:`,
/// `echo`, `test`, `[`, `pwd`, `type`, `times`, `help`, `jobs`, `exit`,
/// `kill`, `wait`), which are left out of the list.
inline bool is_state_changing_word(std::string_view word) noexcept {
  constexpr std::string_view shell_words[] = {
      ".",       "alias",    "bg",      "bind",     "break",   "builtin",  "caller",  "cd",       "command",
      "compgen", "complete", "compopt", "continue", "declare", "dirs",     "disown",  "enable",   "eval",
      "exec",    "export",   "fc",      "fg",       "getopts", "hash",     "history", "let",      "local",
      "logout",  "mapfile",  "popd",    "printf",   "pushd",   "read",     "readarray", "readonly", "return",
      "set",     "shift",    "shopt",   "source",   "suspend", "trap",     "typeset", "ulimit",   "umask",
      "unalias", "unset",    "if",      "then",     "else",    "elif",     "fi",      "case",     "esac",
      "for",     "select",   "while",   "until",    "do",      "done",     "in",      "function", "time",
      "{",       "}",        "!",       "[[",       "]]",      "coproc"};
  return std::find(std::begin(shell_words), std::end(shell_words), word) != std::end(shell_words);
}

}  // namespace detail

/// False only for a command that provably leaves its shell's directory and
/// exported variables as they were, so that its call need not capture them
/// (and bash may still exec a lone program instead of forking it): a list
/// of simple commands (`;`, `&&`, `||`, `|`, `&`, newlines) of plain words
/// and redirections, without quotes, escapes, expansions (`$`, backquotes),
/// groups, subshells or comments, each starting with a program's name or
/// path (no glob, tilde or `=` in it: an expansion could name `cd`, an
/// assignment persists) or an inert builtin such as `true` or `echo`. True
/// for everything else: only a false "changes nothing" would lose state.
inline bool may_change_shell_state(std::string_view command) noexcept {
  auto is_word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./,:@%+-=~^*?[]").find(c) != std::string_view::npos;
  };
  auto first_word_ok = [](std::string_view word) {
    if (word.find_first_of("=~*?[]%") != std::string_view::npos && word != "[") return false;
    if (word.find('/') != std::string_view::npos) return true;  // a path: never a builtin
    return !detail::is_state_changing_word(word);
  };
  bool at_start = true;  // the next word names the command
  bool after_redirection = false;
  std::size_t i = 0;
  while (i < command.size()) {
    const char c = command[i];
    if (c == ' ' || c == '\t') {
      ++i;
    } else if (c == '\n' || c == ';' || c == '|') {
      at_start = true;
      after_redirection = false;
      ++i;
    } else if (c == '&') {
      if (i + 1 < command.size() && command[i + 1] == '>') {  // &> file
        if (at_start) return true;
        after_redirection = true;
        i += 2;
        continue;
      }
      at_start = true;
      after_redirection = false;
      ++i;
    } else if (c == '>' || c == '<') {
      if (at_start) return true;  // a redirection before the command's name
      ++i;
      while (i < command.size() && (command[i] == '>' || command[i] == '<')) ++i;  // >> << <<<
      if (i < command.size() && command[i] == '&') {  // 2>&1, >&-
        ++i;
        while (i < command.size() && (std::isdigit(static_cast<unsigned char>(command[i])) || command[i] == '-')) ++i;
        continue;
      }
      after_redirection = true;
    } else if (is_word_char(c)) {
      const std::size_t begin = i;
      while (i < command.size() && is_word_char(command[i])) ++i;
      const std::string_view word = command.substr(begin, i - begin);
      if (i < command.size() && (command[i] == '>' || command[i] == '<') && at_start) return true;  // 2>x cmd
      if (after_redirection) {
        after_redirection = false;
      } else if (at_start) {
        if (!first_word_ok(word)) return true;
        at_start = false;
      }
    } else {
      return true;  // quotes, escapes, $, `, (, ), {, }, #, ! and anything else
    }
  }
  return false;
}

/// Whether a call that starts as `start` needs its final state captured:
/// when its command may change the state (may_change_shell_state), when
/// its carried directory was not used (the next state is the root), or when
/// a startup variable of the host or of the carried environment
/// (`BASH_ENV`, `LD_PRELOAD` …) or an exported function could run code in
/// the shell before the command.
inline bool needs_state_capture(std::string_view command, const carried_start& start) {
  if (start.notice || may_change_shell_state(command)) return true;
  auto runs_code = [](std::string_view name) { return is_startup_variable(name) || name.starts_with("BASH_FUNC_"); };
  if (std::ranges::any_of(start.env, [&](const auto& entry) { return runs_code(entry.first); })) return true;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view text(*entry);
    if (runs_code(text.substr(0, text.find('=')))) return true;
  }
  return false;
}

/// The session's next state after a call that started as `start` from
/// `before` under `mode` and exited leaving `final_state`. Names that are
/// not valid UTF-8, or hold a value that is not, are not carried: they are
/// appended to `dropped`.
inline shell_state_event next_state(const shell_state_event& before, const carried_start& start,
                                    const shell_state& final_state, state_carry carry, const std::filesystem::path& root,
                                    std::optional<sandbox_mode> mode, std::vector<std::string>& dropped) {
  shell_state_event next;
  if (carry.cwd) {
    const std::string cwd = final_state.cwd.string();
    const auto relative = detail::inside_root(final_state.cwd, root);
    if (!is_valid_utf8(cwd))
      next.cwd = before.cwd;
    else if (!relative || *relative != ".")
      next.cwd = cwd;  // outside the root: kept, and refused (with a notice) when used
  }
  if (!carry.env) return next;
  for (const auto& [name, value] : final_state.env) {
    if (!is_valid_utf8(name) || !is_valid_utf8(value)) {
      dropped.push_back(to_valid_utf8(name));
      continue;
    }
    next.env.emplace(name, value);
    if (!is_startup_variable(name) || !mode) continue;
    // Unchanged since it was carried in: still the setter's; else this call's.
    const auto was = before.env.find(name);
    const auto set_under = before.set_under.find(name);
    if (was != before.env.end() && was->second == value && set_under != before.set_under.end())
      next.set_under.emplace(name, set_under->second);
    else
      next.set_under.emplace(name, *mode);
  }
  // What this call started without is still the session's.
  for (const auto& name : start.withheld) {
    if (next.env.contains(name)) continue;
    next.env.emplace(name, before.env.at(name));
    next.set_under.emplace(name, before.set_under.at(name));
  }
  for (const auto& name : final_state.unset) {
    if (is_valid_utf8(name))
      next.unset.push_back(name);
    else
      dropped.push_back(to_valid_utf8(name));
  }
  return next;
}

/// The lines a result text starts with for a call whose start was carried:
/// a fallback notice, then `[cwd: sub/dir]` when it ran below the root.
inline std::string render_carried_start(const carried_start& start) {
  std::string text;
  if (start.notice) text += *start.notice + '\n';
  if (!start.shown_cwd.empty()) text += fmt::format("[cwd: {}]\n", to_valid_utf8(start.shown_cwd));
  return text;
}

/// The line saying the call's final state was not carried forward.
inline std::string render_state_not_carried(std::string_view why) {
  return fmt::format("[shell state: {}; the next call starts where this one did]\n", to_valid_utf8(why));
}

/// The line naming variables left behind for not being valid UTF-8.
inline std::string render_dropped_variables(const std::vector<std::string>& dropped) {
  std::string names;
  for (std::size_t i = 0; i < dropped.size() && i < 8; ++i) names += (i ? ", " : "") + dropped[i];
  if (dropped.size() > 8) names += fmt::format(" and {} more", dropped.size() - 8);
  return fmt::format("[shell state: {} not carried (not valid UTF-8): {}]\n",
                     dropped.size() == 1 ? "1 variable" : fmt::format("{} variables", dropped.size()), names);
}

}  // namespace bashexec
