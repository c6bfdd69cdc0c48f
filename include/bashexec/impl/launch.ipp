// The bodies of launch.hpp's non-template functions (see detail/linkage.hpp).
#pragma once

#include "bashexec/launch.hpp"

#include <string>

#include <sys/resource.h>

namespace bashexec {

BASHEXEC_DECL std::string resource_name(int resource) {
  switch (resource) {
    case RLIMIT_AS: return "RLIMIT_AS";
    case RLIMIT_CPU: return "RLIMIT_CPU";
    case RLIMIT_FSIZE: return "RLIMIT_FSIZE";
    case RLIMIT_NOFILE: return "RLIMIT_NOFILE";
    case RLIMIT_NPROC: return "RLIMIT_NPROC";
    case RLIMIT_DATA: return "RLIMIT_DATA";
    case RLIMIT_STACK: return "RLIMIT_STACK";
    case RLIMIT_CORE: return "RLIMIT_CORE";
    default: return "resource " + std::to_string(resource);
  }
}

}  // namespace bashexec
