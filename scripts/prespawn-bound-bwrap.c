// prespawn-bound-bwrap.c: how far a warm bwrap sandbox can take a confined
// call (issue 14). Alternating, N times: cold `bash -c true` (the floor);
// cold `bwrap <read-only-like profile> -- bash -c true`; and a sandbox built
// ahead whose waiter (a bash blocked in `read`) is released by one write and
// execs `bash -c true`, timed both to bwrap's --json-status-fd "exit-code"
// and to waitpid (namespace teardown included).
//   gcc -O2 -o /tmp/prespawn-bound-bwrap scripts/prespawn-bound-bwrap.c && /tmp/prespawn-bound-bwrap 100
// 2026-12-01, 2-vCPU VM, floor ≈ 5.2–5.7 ms that hour: cold bwrap 3.07–3.17×
// the floor; warm 1.31× to "exit-code", 1.35× to waitpid. The bash exec and
// start-up inside the namespaces stay on the critical path.
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char** environ;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void* a, const void* b) { double x = *(double*)a, y = *(double*)b; return x < y ? -1 : x > y; }
#define BW "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--new-session", "--"
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  static double t[4][1000];
  char* plain[] = {"bash", "-c", "true", NULL};
  char* cold[] = {BW, "/bin/bash", "-c", "true", NULL};
  char* warm[] = {"bwrap", "--json-status-fd", "3", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--new-session", "--", "/bin/bash", "-c", "read -r _ <&0; exec /bin/bash -c true", NULL};
  for (int i = 0; i < n; ++i) {
    pid_t p; double a = now();
    posix_spawn(&p, "/bin/bash", NULL, NULL, plain, environ); waitpid(p, NULL, 0); t[0][i] = now() - a;
    a = now(); posix_spawnp(&p, "bwrap", NULL, NULL, cold, environ); waitpid(p, NULL, 0); t[1][i] = now() - a;
    int ctl[2]; pipe(ctl); int st[2]; pipe(st);
    posix_spawn_file_actions_t fa; posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, ctl[0], 0); posix_spawn_file_actions_addclose(&fa, ctl[1]); posix_spawn_file_actions_adddup2(&fa, st[1], 3); posix_spawn_file_actions_addclose(&fa, st[0]);
    posix_spawnp(&p, "bwrap", &fa, NULL, warm, environ); posix_spawn_file_actions_destroy(&fa); close(ctl[0]); close(st[1]);
    usleep(30000);  // the sandbox is built and the waiter blocks in read
    char buf[4096]; size_t got = 0; for (;;) { ssize_t r = read(st[0], buf + got, sizeof buf - 1 - got); if (r <= 0) break; got += r; buf[got] = 0; if (strstr(buf, "child-pid")) break; }
    a = now(); write(ctl[1], "x\n", 2);
    for (;;) { ssize_t r = read(st[0], buf + got, sizeof buf - 1 - got); if (r <= 0) break; got += r; buf[got] = 0; if (strstr(buf, "exit-code")) break; }
    t[3][i] = now() - a; waitpid(p, NULL, 0); t[2][i] = now() - a; close(ctl[1]); close(st[0]);
  }
  const char* names[] = {"cold bash (floor)", "cold bwrap", "warm bwrap, waitpid", "warm bwrap, exit-code"};
  for (int k = 0; k < 4; ++k) { qsort(t[k], n, sizeof(double), cmp); }
  for (int k = 0; k < 4; ++k) printf("%-18s p50 %7.0f us  p99 %7.0f us  p50/floor %.2f\n", names[k], t[k][n / 2], t[k][n * 99 / 100], t[k][n / 2] / t[0][n / 2]);
}
