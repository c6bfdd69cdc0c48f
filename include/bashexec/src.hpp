// src.hpp: the bodies of bashexec's non-template functions, for the separately
// compiled mode (see detail/linkage.hpp). Include it in exactly one
// translation unit, built with BASHEXEC_SEPARATE_COMPILATION defined; the
// CMake target `bashexec::compiled` does both. A test checks that every
// `impl/*.ipp` under include/bashexec is listed here.
#pragma once

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#error "<bashexec/src.hpp> is for the separately compiled mode: define BASHEXEC_SEPARATE_COMPILATION"
#endif

#include "bashexec/bashexec.hpp"

// clang-format off
// -- the implementation files, sorted --
#include "bashexec/detail/impl/no_sigpipe.ipp"
#include "bashexec/detail/impl/pidfd.ipp"
#include "bashexec/detail/impl/reactor.ipp"
#include "bashexec/detail/impl/spawn_thread.ipp"
#include "bashexec/detail/impl/status_pipe.ipp"
#include "bashexec/detail/impl/unique_fd.ipp"
#include "bashexec/impl/process_handle.ipp"
// -- end --
// clang-format on
