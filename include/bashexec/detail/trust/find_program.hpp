// detail/trust/find_program: where the programs the host executes come from
// (docs/contract.md "Beyond": nothing the host runs can be planted by a
// command). A bare name is looked up in a fixed system search path, never in
// $PATH, which often holds directories a confined command may write
// (`.venv/bin`, `node_modules/.bin`); a name with a slash must be absolute.
// The program found is trusted only when it and every directory above it
// (along the path as given and along its resolved target) belong to root or
// to the running user and are writable by nobody else (a sticky directory
// such as /var/tmp may be: nobody else can rename or remove what is ours). Resolved once, in the
// parent, because the spawn changes directory before exec and a confined
// child may not see the caller's PATH. Whether the program also lies inside
// a root a confined command may write is the caller's check
// (`program_refusal`), since only it knows the workspace.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Where a bare program name is looked up, in this order.
inline constexpr std::string_view trusted_search_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A program the host may execute, or why not.
struct program_lookup {
  /// The program's absolute path as found (symlinks kept, so a multi-call
  /// binary still sees its name; both the path and its resolved target were
  /// checked); empty when it was not found or is not trusted.
  std::optional<std::filesystem::path> path;
  /// Why `path` is empty, as a clause ("bwrap: not found in …").
  std::string refusal;
};

BASHEXEC_DECL bool is_executable_file(const std::filesystem::path& path);

/// Resolves `program` (a bare name, or an absolute path) and checks that
/// nobody but root or the running user can replace it.
BASHEXEC_DECL program_lookup lookup_trusted_program(const std::filesystem::path& program);

/// Throws std::invalid_argument naming `field` unless `program` is a bare
/// name or an absolute path.
BASHEXEC_DECL void validate_program_name(const std::filesystem::path& program, std::string_view field);

/// Why `program` must not run for an executor whose workspace is
/// `workspace_root`: not found, not trusted, or lying under a root a
/// confined command may write (the workspace and /tmp), where a command
/// could replace it and have it run as the host on the next call. Empty
/// when it may run.
BASHEXEC_DECL std::string program_refusal(const program_lookup& program, const std::filesystem::path& workspace_root);

/// `lookup_trusted_program(program).path`.
BASHEXEC_DECL std::optional<std::filesystem::path> find_program(const std::filesystem::path& program);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/trust/impl/find_program.ipp"
#endif
