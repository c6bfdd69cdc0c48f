// journaling_spawner: an out-of-tree spawn policy with runtime settings of
// its own (docs/extending.md, "A spawn policy with settings"). It spawns
// through fork_exec and appends one line per spawn (the program, then the
// workdir) to a journal file its settings name. The settings are a nested
// `config` with `validate()`; the executor receives them at construction
// (`basic_executor(executor_config, confinement_config, spawn_config)`),
// validates them and passes them to the constructor below. It uses only
// bashexec's installed headers and passes the spawn laws.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

#include <bashexec/config.hpp>
#include <bashexec/errors.hpp>
#include <bashexec/spawn.hpp>
#include <bashexec/spawn/fork_exec.hpp>

namespace example {

class journaling_spawner {
 public:
  static constexpr std::string_view name = "journaling";
  // It runs through fork_exec, so it can do what fork_exec can.
  static constexpr auto capabilities = bashexec::spawn_capabilities_of<bashexec::fork_exec>;

  // Its own settings, no field in bashexec's executor_config.
  struct config {
    // Where each spawn is recorded; appended to, created when missing.
    std::filesystem::path journal = "/var/tmp/bashexec-journal.log";
    // A spawn is refused once this many were recorded (a runaway agent).
    std::uint64_t max_spawns = 100000;

    // The executor calls this at construction: std::invalid_argument naming
    // the field, spelled `<policy>.<field>`.
    void validate() const {
      if (!journal.is_absolute())
        throw std::invalid_argument("journaling.journal must be an absolute path, not '" + journal.string() + "'");
      if (max_spawns == 0) throw std::invalid_argument("journaling.max_spawns must be positive");
    }
  };

  // The natural shape: the executor's config and the policy's own.
  journaling_spawner(const bashexec::executor_config&, const config& own) : own_(own) {}

  // Called concurrently on one const instance: the journal is guarded.
  bashexec::process_handle spawn(const bashexec::launch_plan& plan) const {
    bashexec::refuse_unsupported<journaling_spawner>(plan);  // never run a plan it cannot honour
    if (plan.argv.empty()) throw std::invalid_argument("launch_plan.argv: empty");
    std::lock_guard lock(mutex_);
    if (spawned_ >= own_.max_spawns)
      throw bashexec::infrastructure_error("journaling: max_spawns (" + std::to_string(own_.max_spawns) +
                                           ") reached");
    bashexec::process_handle child = inner_.spawn(plan);
    ++spawned_;
    if (std::FILE* journal = std::fopen(own_.journal.c_str(), "ae")) {  // "e": close-on-exec
      std::fprintf(journal, "%s %s\n", plan.argv.front().c_str(), plan.workdir.c_str());
      std::fclose(journal);
    }
    return child;
  }

  const config& settings() const noexcept { return own_; }
  std::uint64_t spawned() const {
    std::lock_guard lock(mutex_);
    return spawned_;
  }

 private:
  config own_;
  bashexec::fork_exec inner_;
  mutable std::mutex mutex_;
  mutable std::uint64_t spawned_ = 0;
};

static_assert(bashexec::spawn_policy<journaling_spawner> && bashexec::spawn_constructible<journaling_spawner>);

}  // namespace example
