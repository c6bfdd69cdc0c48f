// A program with one deliberate bug, built with the Catch2 suite's
// sanitizer flags (tests/CMakeLists.txt): the sanitizer must stop it before
// its last line, which proves that the suite's sanitizer lane is switched on.
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char**) {
#if defined(CANARY_address)
  // A heap read one byte past the end.
  char* block = static_cast<char*>(std::malloc(8));
  std::memset(block, 'x', 8);
  const volatile char past_the_end = block[8 + argc - 1];
  std::printf("%d\n", past_the_end);
  std::free(block);
#elif defined(CANARY_undefined)
  // A signed overflow the optimiser cannot see through.
  volatile int big = 2147483647;
  const int overflowed = big + argc;
  std::printf("%d\n", overflowed);
#endif
  std::puts("the canary ran to the end");
  return 0;
}
