// Runs the laws the shipped policies pass against the two example policies,
// then uses both in an executor, and the example spawn policy in another. Built against the INSTALLED bashexec package
// only (tests/consumer, docs/extending.md). Exit 0: the laws hold (or the
// machine cannot confine at all, which it says); 1: a law is broken.
#include <cstdio>
#include <string>

#include <bashexec/basic_executor.hpp>
// This file composes its own executors: against bashexec::compiled, which
// holds only the shipped executors' members, it includes their definitions.
#include <bashexec/impl/basic_executor.hpp>
#include <bashexec/laws/confinement.hpp>
#include <bashexec/laws/output.hpp>

#include "counting_spawner.hpp"
#include "head_only.hpp"
#include "under_launcher.hpp"

namespace {

int print(const char* what, const bashexec::laws::report& report) {
  if (report.unavailable) {
    std::printf("%s: skipped: %s\n", what, report.unavailable->c_str());
    return 0;
  }
  for (const auto& violation : report.violations) std::fprintf(stderr, "%s: %s\n", what, violation.c_str());
  std::printf("%s: %s\n", what, report.passed() ? "laws hold" : "LAWS BROKEN");
  return report.passed() ? 0 : 1;
}

}  // namespace

int main() {
  int failures = 0;
  failures += print("head_only", bashexec::laws::check_output_laws<example::head_only>());
  const auto confinement = bashexec::laws::check_confinement_laws<example::under_launcher>();
  failures += print("under_launcher", confinement);

  // Both policies in one executor: the command sees the launcher's limit,
  // and a long output keeps its head.
  if (!confinement.unavailable) {
    using executor_type = bashexec::basic_executor<bashexec::policies<
        bashexec::confine_with<example::under_launcher>, bashexec::collect_with<example::head_only>>>;
    bashexec::executor_config config;
    config.output_cap = 16;
    executor_type executor(config, {.launcher = {"prlimit", "--nofile=200"}, .bwrap = {}});
    const auto result = executor.run(executor.resolve({.command = "ulimit -n; seq 1000"}));
    const bool as_promised = result.exit_code == 0 && result.out.text.rfind("200\n1\n2\n", 0) == 0 &&
                             result.out.text.size() == 16 && result.out.truncated && result.sandbox &&
                             result.sandbox->mode == bashexec::sandbox_mode::read_only;
    std::printf("executor: %s\n", as_promised ? "limit and head as configured" : "UNEXPECTED");
    if (!as_promised) {
      std::fprintf(stderr, "stdout '%s' stderr '%s'\n", result.out.text.c_str(), result.err.text.c_str());
      ++failures;
    }
  }

  // The stateful spawn policy: the executor holds one instance and every
  // run goes through it.
  {
    bashexec::basic_executor<bashexec::policies<bashexec::spawn_with<counting_spawner>>> executor;
    const auto first = executor.run(executor.resolve({.command = "echo one"}));
    const auto second = executor.run(executor.resolve({.command = "echo two"}));
    const bool counted = first.out.text == "one\n" && second.out.text == "two\n" && executor.spawner().spawned() == 2;
    std::printf("counting_spawner: %s\n", counted ? "two runs, two spawns counted" : "UNEXPECTED");
    if (!counted) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
