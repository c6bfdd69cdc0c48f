// detail/text/c_strings: the NULL-terminated char* arrays execve wants, built in
// the parent (the child of a spawn must not allocate).
#pragma once

#include <string>
#include <vector>

#include "bashexec/detail/linkage.hpp"

namespace bashexec::detail {

/// Pointers into `strings` (which must outlive the result), NULL-terminated.
BASHEXEC_DECL std::vector<char*> c_string_array(const std::vector<std::string>& strings);

}  // namespace bashexec::detail

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/detail/text/impl/c_strings.ipp"
#endif
