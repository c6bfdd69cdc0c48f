// Must NOT compile: Landlock applies itself in a pre-exec hook, which
// posix_spawner does not have. The error must say what to pick instead.
#include <bashexec/basic_executor.hpp>
#include <bashexec/confinement/landlock.hpp>
#include <bashexec/spawn/posix_spawn.hpp>

int main() {
  bashexec::basic_executor<
      bashexec::policies<bashexec::spawn_with<bashexec::posix_spawner>, bashexec::confine_with<bashexec::landlock>>>
      executor;
}
