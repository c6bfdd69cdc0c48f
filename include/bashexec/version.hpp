// version: the library version (CMake reads it from here, so there is one
// place to bump).
#pragma once

#include <string_view>

#define BASHEXEC_VERSION_MAJOR 0
#define BASHEXEC_VERSION_MINOR 1
#define BASHEXEC_VERSION_PATCH 0

namespace bashexec {

inline constexpr std::string_view version = "0.1.0";

}  // namespace bashexec
