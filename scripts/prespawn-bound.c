// prespawn-bound.c: the lower bound of any prespawned design that keeps a
// cold `bash -c`'s semantics by exec'ing bash in the waiting process (issue
// 14). Three ways to run `bash -c true`, alternating, N times:
//   cold          posix_spawn + waitpid (the benchmarks' floor);
//   warm fork     a child forked ahead, blocked in read(); timed: the write
//                 that releases it, its execve of bash, waitpid;
//   warm CLONE_VM the same with a waiter that shares the parent's memory
//                 (no copy to tear down at execve; raw syscalls only).
// The warm cases time only what a call would still pay. Build and run:
//   gcc -O2 -o /tmp/prespawn-bound scripts/prespawn-bound.c && /tmp/prespawn-bound 200
// 2026-12-01, quiet 2-vCPU VM (floor ≈ 4.5 ms that hour): p50 warm fork
// 1.00×, warm CLONE_VM 0.97× the cold p50; pinned to one CPU the same. The
// execve of bash and its start-up are the floor; a warm pool removes only
// the clone and the child's set-up steps.
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char** environ;
static char* argv_[] = {"bash", "-c", "true", NULL};
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void* a, const void* b) { double x = *(double*)a, y = *(double*)b; return x < y ? -1 : x > y; }
static int ctl[2];
static int waiter(void* arg) {  // raw syscalls only: shares the parent's memory
  (void)arg; char c;
  syscall(SYS_read, ctl[0], &c, 1);
  syscall(SYS_execve, "/bin/bash", argv_, environ);
  syscall(SYS_exit, 127); return 0;
}
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  static double t[3][2000];
  char* stack = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  for (int i = 0; i < n; ++i) {
    // cold
    double a = now(); pid_t p; posix_spawn(&p, "/bin/bash", NULL, NULL, argv_, environ); waitpid(p, NULL, 0); t[0][i] = now() - a;
    // warm, fork
    pipe(ctl); pid_t f = fork();
    if (f == 0) { char c; read(ctl[0], &c, 1); execve("/bin/bash", argv_, environ); _exit(127); }
    usleep(2000);
    a = now(); write(ctl[1], "x", 1); waitpid(f, NULL, 0); t[1][i] = now() - a; close(ctl[0]); close(ctl[1]);
    // warm, CLONE_VM
    pipe(ctl); pid_t v = clone(waiter, stack + (1 << 16), CLONE_VM | SIGCHLD, NULL);
    usleep(2000);
    a = now(); write(ctl[1], "x", 1); waitpid(v, NULL, 0); t[2][i] = now() - a; close(ctl[0]); close(ctl[1]);
  }
  const char* names[] = {"cold posix_spawn", "warm fork", "warm CLONE_VM"};
  for (int k = 0; k < 3; ++k) { qsort(t[k], n, sizeof(double), cmp); printf("%-18s p50 %7.0f us  p99 %7.0f us  p50/cold %.2f\n", names[k], t[k][n / 2], t[k][n * 99 / 100], t[k][n / 2] / t[0][n / 2]); }
}
