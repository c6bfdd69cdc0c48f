// detail/c_strings: the NULL-terminated char* arrays execve wants, built in
// the parent (the child of a spawn must not allocate).
#pragma once

#include <string>
#include <vector>

namespace bashexec::detail {

/// Pointers into `strings` (which must outlive the result), NULL-terminated.
inline std::vector<char*> c_string_array(const std::vector<std::string>& strings) {
  std::vector<char*> array;
  array.reserve(strings.size() + 1);
  for (const auto& s : strings) array.push_back(const_cast<char*>(s.c_str()));
  array.push_back(nullptr);
  return array;
}

}  // namespace bashexec::detail
