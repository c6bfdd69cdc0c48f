// Runs the laws the shipped policies pass against the example policies —
// output (head_only), confinement (under_launcher), spawn (counting_spawner,
// and journaling_spawner with settings of its own), ownership (the shipped
// ones and owner_prefix) — then uses them in executors. Built against the
// INSTALLED bashexec package only (tests/consumer, docs/extending.md); no
// file of bashexec's tests is needed or edited. Exit 0: the laws hold (a
// policy the machine cannot run at all says so and is skipped); 1: a law is
// broken — a policy whose runner cannot start where the machine can confine
// is broken, never skipped.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <bashexec/basic_executor.hpp>
// This file composes its own executors: against bashexec::compiled, which
// holds only the shipped executors' members, it includes their definitions.
#include <bashexec/impl/basic_executor.hpp>
#include <bashexec/laws/confinement.hpp>
#include <bashexec/laws/output.hpp>
#include <bashexec/laws/ownership.hpp>
#include <bashexec/laws/spawn.hpp>
#include <bashexec/ownership/no_owners.hpp>
#include <bashexec/ownership/tracked_owners.hpp>

#include "audited_executor.hpp"
#include "counting_spawner.hpp"
#include "head_only.hpp"
#include "journaling_spawner.hpp"
#include "owner_prefix.hpp"
#include "under_launcher.hpp"

namespace {

// The documented pattern: three answers, each printed as what it is.
int print(const char* what, const bashexec::laws::report& report) {
  for (const auto& note : report.not_checked) std::printf("%s: not checked: %s\n", what, note.c_str());
  switch (report.verdict()) {
    case bashexec::laws::verdict::unavailable:
      std::printf("%s: skipped: this machine cannot run it: %s\n", what, report.unavailable->c_str());
      return 0;
    case bashexec::laws::verdict::broken:
      for (const auto& violation : report.violations) std::fprintf(stderr, "%s: %s\n", what, violation.c_str());
      std::printf("%s: LAWS BROKEN (%zu violations)\n", what, report.violations.size());
      return 1;
    case bashexec::laws::verdict::laws_hold:
      std::printf("%s: laws hold\n", what);
      return 0;
  }
  return 1;
}

// A negative control: the laws must be able to fail here too.
int expect_broken(const char* what, const bashexec::laws::report& report) {
  if (report.verdict() == bashexec::laws::verdict::broken) {
    std::printf("%s: broken, as it must be (%zu violations, first: %s)\n", what, report.violations.size(),
                report.violations.front().c_str());
    return 0;
  }
  std::printf("%s: NOT CAUGHT: the laws %s a broken policy\n", what,
              report.unavailable ? "called unavailable" : "passed");
  return 1;
}

/// counting_spawner's laws, broken: every child gets a variable its plan
/// did not ask for.
struct adds_a_variable {
  static constexpr std::string_view name = "adds_a_variable";
  static constexpr auto capabilities = bashexec::spawn_capabilities_of<bashexec::fork_exec>;
  bashexec::process_handle spawn(const bashexec::launch_plan& plan) const {
    bashexec::refuse_unsupported<adds_a_variable>(plan);
    bashexec::launch_plan changed = plan;
    changed.env.push_back("INJECTED=1");
    return inner.spawn(changed);
  }
  bashexec::fork_exec inner;
};

/// owner_prefix, broken: a task without a stored owner is closed to a
/// caller without a session.
struct closes_ownerless {
  static constexpr std::string_view name = "closes_ownerless";
  static std::optional<bashexec::owner_token> keep(const std::optional<bashexec::owner_token>& owner) {
    return owner;
  }
  static bool may_access(const std::optional<bashexec::owner_token>& stored,
                         const std::optional<bashexec::owner_token>& caller) {
    return caller && (!stored || stored == caller);
  }
};

}  // namespace

int main() {
  int failures = 0;
  failures += print("head_only", bashexec::laws::check_output_laws<example::head_only>());
  failures += print("counting_spawner", bashexec::laws::check_spawn_laws<counting_spawner>());
  const std::filesystem::path journal =
      std::filesystem::path("/var/tmp") / ("bashexec-example-journal-" + std::to_string(::getpid()));
  failures += print("journaling_spawner", bashexec::laws::check_spawn_laws<example::journaling_spawner>(
                                              {.journal = journal, .max_spawns = 100000}));
  std::filesystem::remove(journal);
  failures += print("tracked_owners", bashexec::laws::check_ownership_laws<bashexec::tracked_owners>());
  failures += print("no_owners", bashexec::laws::check_ownership_laws<bashexec::no_owners>());
  failures += print("owner_prefix", bashexec::laws::check_ownership_laws<example::owner_prefix>());
  const auto confinement = bashexec::laws::check_confinement_laws<example::under_launcher>();
  failures += print("under_launcher", confinement);

  // Negative controls, one per kind checked here.
  failures += expect_broken("adds_a_variable", bashexec::laws::check_spawn_laws<adds_a_variable>());
  failures += expect_broken("closes_ownerless", bashexec::laws::check_ownership_laws<closes_ownerless>());
  if (!confinement.unavailable) {
    // A launcher that is not there: bwrap cannot start it. The machine can
    // confine (the laws just held), so this is broken, never "unavailable".
    failures += expect_broken("under_launcher with a missing launcher",
                              bashexec::laws::check_confinement_laws<example::under_launcher>(
                                  {.launcher = {"/usr/bin/bashexec-no-such-launcher"}, .bwrap = {}}));
  }

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

  // The spawn policy with settings of its own: the executor receives them,
  // validates them and builds its one instance from them.
  {
    using executor_type =
        bashexec::basic_executor<bashexec::policies<bashexec::spawn_with<example::journaling_spawner>>>;
    bool refused = false;
    try {
      executor_type invalid({}, {}, {.journal = "relative.log"});
    } catch (const std::invalid_argument& error) {
      refused = std::string(error.what()).find("journaling.journal") != std::string::npos;
    }
    executor_type executor({}, {}, {.journal = journal, .max_spawns = 1});
    const auto first = executor.run(executor.resolve({.command = "echo journaled"}));
    bool limited = false;
    try {
      (void)executor.run(executor.resolve({.command = "true"}));
    } catch (const bashexec::infrastructure_error&) {
      limited = true;
    }
    std::error_code ignored;
    const bool journaled = first.out.text == "journaled\n" && std::filesystem::file_size(journal, ignored) > 0;
    std::filesystem::remove(journal, ignored);
    const bool as_configured = refused && journaled && limited && executor.spawner().spawned() == 1;
    std::printf("journaling_spawner: %s\n",
                as_configured ? "settings validated, journal written, max_spawns honoured" : "UNEXPECTED");
    if (!as_configured) ++failures;
  }
  // An executor of the host's own: the decorator is an executor as the one
  // it wraps is, and sees each command on its way.
  {
    bashexec::basic_executor<bashexec::policies<>> inner;
    std::vector<std::string> audit;
    example::audited_executor<decltype(inner)> executor(inner, [&](const std::string& what) { audit.push_back(what); });
    static_assert(bashexec::executor<decltype(executor)>);
    const auto ran = executor.run(executor.resolve({.command = "echo audited"}));
    const auto waited = executor.wait(executor.start(executor.resolve({.command = "exit 4"})));
    const bool passed = ran.out.text == "audited\n" && waited.exit_code == 4 &&
                        audit == std::vector<std::string>{"run echo audited", "start exit 4"};
    std::printf("audited_executor: %s\n", passed ? "a run and a start passed through and audited" : "UNEXPECTED");
    if (!passed) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
