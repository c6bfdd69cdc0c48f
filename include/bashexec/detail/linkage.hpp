// detail/linkage: how bashexec's non-template functions are linked.
//
// Header-only (the default): every function is defined in the headers and
// declared `inline`; nothing to build or link.
//
// Separately compiled: define BASHEXEC_SEPARATE_COMPILATION for every
// translation unit (the CMake target `bashexec::compiled` does this) and
// compile <bashexec/src.hpp> in exactly one of them (the target's own
// src/bashexec.cpp). The headers then carry declarations, templates and
// small inline functions only; the bodies of the rest live in `impl/*.ipp`
// files that just that one translation unit compiles. This is the convention
// of Asio and Boost.Beast (`*_SEPARATE_COMPILATION`) and of spdlog's compiled
// mode: a file that includes the umbrella header then parses far less.
#pragma once

#if defined(BASHEXEC_SEPARATE_COMPILATION)
#define BASHEXEC_DECL
#else
#define BASHEXEC_DECL inline
#endif
