// Must NOT compile: a spawn policy's `spawn` must hand back a process_handle
// (pid + pidfd the engine drives), not a raw pid. The error must point at
// the concept's documentation.
#include <string_view>

#include <sys/types.h>

#include <bashexec/basic_executor.hpp>

struct raw_pid_spawner {
  static constexpr std::string_view name = "raw-pid";
  pid_t spawn(const bashexec::launch_plan&) const { return -1; }
};

int main() { bashexec::basic_executor<bashexec::policies<bashexec::spawn_with<raw_pid_spawner>>> executor; }
