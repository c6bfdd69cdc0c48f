// pipe_test_support: reading a directly spawned child's stdout and stderr
// pipes to end of file, for the tests that drive spawn policies and
// confinements through launch plans without an executor — the same reader
// the spawn laws use (laws/spawn.hpp), whose error a test reports as a failure.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include <bashexec/laws/spawn.hpp>
#include <bashexec/unique_fd.hpp>

namespace test_support {

/// Reads `out` and `err` until both reach end of file; {stdout, stderr}.
inline std::pair<std::string, std::string> read_both(bashexec::unique_fd out, bashexec::unique_fd err) {
  try {
    return bashexec::laws::detail::read_both(std::move(out), std::move(err));
  } catch (const std::exception& e) {
    FAIL(e.what());
  }
  return {};
}

}  // namespace test_support
