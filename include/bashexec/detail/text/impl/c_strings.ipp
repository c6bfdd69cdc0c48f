// The bodies of detail/text/c_strings.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/detail/text/c_strings.hpp"

#include <string>
#include <vector>

namespace bashexec::detail {

BASHEXEC_DECL std::vector<char*> c_string_array(const std::vector<std::string>& strings) {
  std::vector<char*> array;
  array.reserve(strings.size() + 1);
  for (const auto& s : strings) array.push_back(const_cast<char*>(s.c_str()));
  array.push_back(nullptr);
  return array;
}

}  // namespace bashexec::detail
