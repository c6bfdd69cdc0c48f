// run_progress: live counters of one foreground run, written by the thread
// that drives the run and readable from any other thread, so that a caller
// can show that a long command is alive (the MCP server's progress
// notifications) without touching the run's output.
#pragma once

#include <atomic>
#include <cstdint>

namespace bashexec {

/// Whole-stream byte counts seen so far. The driving thread stores them
/// after every read; readers see monotonically growing values.
struct run_progress {
  std::atomic<std::uint64_t> stdout_bytes{0};
  std::atomic<std::uint64_t> stderr_bytes{0};
};

}  // namespace bashexec
