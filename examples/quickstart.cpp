// Quick start: run a command confined to read-only, then one in the background.
#include <bashexec/bashexec.hpp>
#include <fmt/core.h>

int main() {
  bashexec::sandbox_executor executor;  // bwrap, else Landlock; read-only by default

  // Foreground: the write is denied, the read works, and the result says so.
  auto result = executor.run(executor.resolve({.command = "cat /etc/hostname; echo hi > denied.txt"}));
  fmt::print("exit {} | stdout: {} | denied: {}\n", result.exit_code.value_or(-1), result.out.text,
             result.sandbox && result.sandbox->denied);

  // Background: start, read incrementally, wait.
  auto id = executor.start(executor.resolve({.command = "for i in 1 2 3; do echo $i; sleep 0.1; done"}));
  auto done = executor.wait(id);
  fmt::print("{} {}: {}", done.id, bashexec::to_string(done.status), executor.read_output(id).delta);
}
