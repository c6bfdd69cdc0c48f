// Shared by the fuzz targets: a property check that libFuzzer reports as a
// crash (with the failed property's text), and one private scratch directory
// per process for targets that need files.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace fuzz_support {

/// A broken property is a crash: libFuzzer saves the input and stops.
[[noreturn]] inline void property_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "\nproperty failed at %s:%d: %s\n", file, line, what);
  std::abort();
}

#define FUZZ_CHECK(cond) ((cond) ? (void)0 : ::fuzz_support::property_failed(#cond, __FILE__, __LINE__))

/// A private directory for this fuzzing process: under
/// $BASHEXEC_FUZZ_SCRATCH when set (scripts/run-fuzz.sh points it at a
/// directory it removes afterwards: libFuzzer ends a timed run with _Exit, so
/// no exit handler of ours runs), else on tmpfs when there is one (the
/// session log fsyncs every append).
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    const char* given = std::getenv("BASHEXEC_FUZZ_SCRATCH");
    std::string base = given && *given ? std::string(given)
                       : std::filesystem::is_directory("/dev/shm") && ::access("/dev/shm", W_OK) == 0
                           ? std::string("/dev/shm")
                           : std::filesystem::temp_directory_path().string();
    std::string templ = base + "/bashexec-fuzz-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch(), ignored);
    });
    return std::filesystem::path(templ);
  }();
  return dir;
}

}  // namespace fuzz_support
