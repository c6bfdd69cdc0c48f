// errors: what `run` and `start` throw. A non-zero exit, a timeout or an abort
// is a result, never an exception; these are for "could not execute at all".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "bashexec/ids.hpp"
#include "bashexec/sandbox_mode.hpp"

namespace bashexec {

/// The command could not be executed at all (unusable workdir, missing shell,
/// stop requested before spawn, a failed system call).
class infrastructure_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// No confinement could be applied for `mode`. Nothing ran: bashexec never
/// falls back to an unconfined run.
class sandbox_unavailable : public infrastructure_error {
 public:
  static constexpr std::string_view code = "SANDBOX_UNAVAILABLE";

  sandbox_unavailable(sandbox_mode mode, const std::string& message)
      : infrastructure_error(message), mode_(mode) {}

  sandbox_mode mode() const noexcept { return mode_; }

 private:
  sandbox_mode mode_;
};

/// A task id this executor does not know (never issued, or forgotten).
class unknown_task : public std::out_of_range {
 public:
  explicit unknown_task(const task_id& id)
      : std::out_of_range("unknown task " + id.value()), id_(id) {}

  const task_id& id() const noexcept { return id_; }

 protected:
  unknown_task(const task_id& id, const std::string& message) : std::out_of_range(message), id_(id) {}

 private:
  task_id id_;
};

/// A task id this executor issued, whose settled task the retention policy
/// (executor_config::retention) has since forgotten: its output is gone.
/// The message says so and names the limits, for a reader (a model) that
/// would otherwise take "unknown" for a typo.
class task_forgotten : public unknown_task {
 public:
  /// `limits`: the retention policy in words ("settled tasks are kept ...").
  task_forgotten(const task_id& id, std::string_view limits)
      : unknown_task(id, "task " + id.value() + " was forgotten: " + std::string(limits)), limits_(limits) {}

  /// The retention policy in words, for a caller that words its own text
  /// (the tools: "nothing was killed" for bash_kill).
  const std::string& limits() const noexcept { return limits_; }

 private:
  std::string limits_;
};

}  // namespace bashexec
