// Runs `echo hi` through the installed bashexec and checks what came back.
#include <cstdio>

#include <bashexec/local_executor.hpp>

int main() {
  bashexec::local_executor executor;
  const auto result = executor.run(executor.resolve({.command = "echo hi"}));
  if (result.exit_code != 0 || result.out.text != "hi\n") {
    std::fprintf(stderr, "unexpected result: exit %d, stdout '%s'\n", result.exit_code.value_or(-1),
                 result.out.text.c_str());
    return 1;
  }
  std::puts("consumer ok");
  return 0;
}
