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
#include "bashexec/detail/impl/c_strings.ipp"
#include "bashexec/detail/impl/find_program.ipp"
#include "bashexec/detail/impl/fork_exec_child.ipp"
#include "bashexec/detail/impl/posix_spawn_setup.ipp"
#include "bashexec/detail/impl/process_group.ipp"
#include "bashexec/detail/impl/resource_limits.ipp"
#include "bashexec/impl/host_hardening.ipp"
#include "bashexec/impl/signal_name.ipp"
#include "bashexec/spawn/impl/fork_exec.ipp"
#include "bashexec/spawn/impl/posix_spawn.ipp"
// -- end --
// clang-format on
