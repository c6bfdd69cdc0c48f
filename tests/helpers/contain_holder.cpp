// contain_holder: a process that holds a default-config fork_exec executor
// with contained commands running, for tests that SIGKILL it (docs/contract.md
// "Beyond": no orphans, ever — the death of the executor's process by any
// signal kills every contained command).
//
//   contain_holder PREFIX
// starts a background task whose `setsid` escapee runs as "PREFIX-bg", then a
// foreground run whose escapee runs as "PREFIX-fg", and blocks in that run.
// Before the run it prints "containment <mechanism>\n" on stdout (flushed).
// The commands build the names from pieces, so no other process's command
// line contains them.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <bashexec/basic_executor.hpp>
#include <bashexec/spawn/fork_exec.hpp>

namespace {

std::string escapee(const std::string& prefix, const std::string& suffix) {
  return "export M=" + prefix + "; setsid bash -c 'exec -a \"$M-" + suffix +
         "\" sleep 300' </dev/null >/dev/null 2>&1 & until grep -qs -- \"$M-[" + suffix.substr(0, 1) + "]" +
         suffix.substr(1) + "\" /proc/[0-9]*/cmdline; do sleep 0.01; done; echo ready; sleep 300";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: contain_holder PREFIX\n");
    return 2;
  }
  const std::string prefix = argv[1];
  bashexec::basic_executor<bashexec::policies<bashexec::spawn_with<bashexec::fork_exec>>> executor;
  const auto id = executor.start(executor.resolve({.command = escapee(prefix, "bg")}));
  std::string seen;
  while (seen.find("ready") == std::string::npos) {
    auto read = executor.read_output(id);
    seen += read.delta;
    if (read.task.status != bashexec::task_status::running) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("containment %s\n", std::string(to_string(executor.containment())).c_str());
  std::fflush(stdout);
  executor.run(executor.resolve({.command = escapee(prefix, "fg"), .timeout = std::chrono::milliseconds(600000)}));
  return 0;
}
