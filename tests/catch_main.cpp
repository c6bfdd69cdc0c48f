// The single Catch2 main shared by every test executable, and the run log
// the suite's count check reads (scripts/check-catch-count.sh).
#define CATCH_CONFIG_MAIN
// Test names are sentences; Catch2 2.13's console reporter asserts when a
// failing test's name has its first ": " past the console width (80).
#define CATCH_CONFIG_CONSOLE_WIDTH 300
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace {

/// When BASHEXEC_CATCH_RUN_LOG names a file, every test case that starts
/// appends "<executable>\t<test name>\n" to it. The count check compares
/// these lines with what the executables list, so "every Catch2 case ran
/// exactly once under CTest" is observed, not inferred from CTest's entries
/// (a name CTest discovery mangles becomes entries that run nothing).
/// One O_APPEND write per line: parallel test processes do not interleave.
struct run_log_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    const char* log = std::getenv("BASHEXEC_CATCH_RUN_LOG");
    // A hidden case ([.]) is not listed; its own CTest entry runs it.
    if (log == nullptr || *log == '\0' || info.isHidden()) return;
    std::string line = executable_name() + '\t' + info.name + '\n';
    int fd = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;  // the count check then reports the case as not run
    [[maybe_unused]] auto written = ::write(fd, line.data(), line.size());
    ::close(fd);
  }

  static std::string executable_name() {
    char path[4096];
    auto n = ::readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return "?";
    std::string full(path, static_cast<std::size_t>(n));
    return full.substr(full.rfind('/') + 1);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(run_log_listener)
