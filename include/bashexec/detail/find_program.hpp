// detail/find_program: resolving a program name to an absolute executable
// path the way a shell would (a name with a slash as given, a bare name on
// $PATH) — done in the parent, once, because the spawn changes directory
// before exec and a confined child may not see the caller's PATH.
#pragma once

#include <filesystem>
#include <optional>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

BASHEXEC_DECL bool is_executable_file(const std::filesystem::path& path);

/// An absolute path to `program`: a name with a slash is taken as given
/// (made absolute, since the spawn changes directory before exec); a bare
/// name is searched on $PATH. Empty when nothing executable is found.
BASHEXEC_DECL std::optional<std::filesystem::path> find_program(const std::filesystem::path& program);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/impl/find_program.ipp"
#endif
