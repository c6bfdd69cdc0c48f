// pipe_test_support: reading a directly spawned child's stdout and stderr
// pipes to end of file, for the tests that drive spawn policies and
// confinements through launch plans without an executor.
#pragma once

#include <cerrno>
#include <string>
#include <utility>

#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <bashexec/detail/unique_fd.hpp>

namespace test_support {

/// Reads `out` and `err` until both reach end of file; {stdout, stderr}.
inline std::pair<std::string, std::string> read_both(bashexec::detail::unique_fd out,
                                                     bashexec::detail::unique_fd err) {
  std::pair<std::string, std::string> text;
  pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
  std::string* sinks[2] = {&text.first, &text.second};
  int open_count = 2;
  while (open_count > 0) {
    if (::poll(fds, 2, 30000) <= 0) {
      if (errno == EINTR) continue;
      FAIL("poll failed or saw nothing for 30 s");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  return text;
}

}  // namespace test_support
