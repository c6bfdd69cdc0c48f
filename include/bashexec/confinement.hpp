// confinement: what a type must provide to be a confinement policy, and the
// per-spawn state (`confined_launch`) it hands back.
//
// Minimal complete definition of a confinement policy `C`:
//   static constexpr bool confines;          // false only for `unconfined`
//   static constexpr bool needs_pre_exec;    // needs a spawn with a hook
//   static constexpr std::string_view name;  // "bwrap", "landlock", …
//   using config = …;                        // its own knobs; `no_config` when none
//   C(const sandbox_config&, const config&); // may throw std::invalid_argument
// `config` is default-constructible; when it has `void validate() const` the
// executor calls it at construction (std::invalid_argument naming the field,
// spelled `<name>.<field>`). The shared `sandbox_config` holds what every
// confinement reads (mode, workspace root, protected paths, network), so a new
// confinement is one new header and edits nothing else.
// and, when `confines`:
//   confined_launch prepare(sandbox_mode, const std::filesystem::path& root,
//                           launch_plan&) const;
//       Edits the plan (argv starts as {shell, "-c", command}) to confine it
//       under `mode` (never danger-full-access). Throws sandbox_unavailable
//       when it cannot.
//   std::optional<std::string> runner_failure(confined_launch&,
//                                             std::string_view err,
//                                             std::string_view out) const;
//       After a non-zero exit, given the run's stderr and stdout (what was
//       kept of them): the reason when the confinement itself failed (the
//       command never ran), else empty. Signatures match anywhere in either
//       stream, ignoring case (contract 16).
//   bool is_denial(std::string_view err) const;
//       Whether stderr speaks this backend's denial dialect (case-insensitive).
// Optionally, for a runner that reports how the command ended:
//   std::optional<int> reported_exit_code(confined_launch&) const;
//       After the runner died of a signal, instead of runner_failure: the
//       command's exit code when the runner had reported it (the command
//       ended on its own before a stop reached the runner), else empty.
// A `chain` additionally provides `select(probe)`; see confinement/chain.hpp.
#pragma once

#include <concepts>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bashexec/config.hpp"
#include "bashexec/detail/linkage.hpp"
#include "bashexec/launch.hpp"
#include "bashexec/result.hpp"
#include "bashexec/unique_fd.hpp"

namespace bashexec {

/// What a confinement keeps for one spawn until the process settles.
struct confined_launch {
  /// Mode and enforcement level; `denied`/`runner_failed` are filled later.
  sandbox_info info;
  /// Read end of a runner status channel (bwrap's --json-status-fd).
  unique_fd status;
  /// Anything that must outlive the spawn call (a Landlock ruleset fd).
  std::shared_ptr<void> keep_alive;
  /// The command runs in a pid namespace of its own whose end kills every
  /// descendant (bwrap's `--unshare-pid`): the containment the result names.
  bool pid_namespace = false;
  /// Parts of this spawn's writable roots are read-only binds its policy's
  /// own denial dialect does not speak (Landlock's protected paths refuse
  /// with EROFS, not EACCES): a failed run whose stderr says
  /// `read_only_bind_dialect` is then a denial too (contract 16).
  bool read_only_binds = false;
};

/// What a write refused by a read-only bind prints (EROFS).
inline constexpr std::string_view read_only_bind_dialect = "read-only file system";

/// The `config` of a confinement that has no knobs of its own.
struct no_config {};

template <class C>
concept confinement_policy = requires {
  { C::confines } -> std::convertible_to<bool>;
  { C::needs_pre_exec } -> std::convertible_to<bool>;
  { C::name } -> std::convertible_to<std::string_view>;
  typename C::config;
} && std::default_initializable<typename C::config> &&
                             std::constructible_from<C, const sandbox_config&, const typename C::config&>;

namespace detail {
/// What `prepare` does first: danger-full-access is never confined, so a
/// caller asking `policy` to prepare it is a bug (std::invalid_argument).
BASHEXEC_DECL void refuse_unconfined_mode(std::string_view policy, sandbox_mode mode);
}  // namespace detail

/// Checks a confinement's own configuration: its `validate()` when it has one
/// (std::invalid_argument naming the field), else nothing.
template <class Config>
void validate_confinement_config(const Config& config) {
  if constexpr (requires { config.validate(); }) config.validate();
}

template <class C>
concept confining_policy =
    confinement_policy<C> && C::confines &&
    requires(const C& c, sandbox_mode mode, const std::filesystem::path& root, launch_plan& plan,
             confined_launch& launch, std::string_view err, std::string_view out) {
      { c.prepare(mode, root, plan) } -> std::same_as<confined_launch>;
      { c.runner_failure(launch, err, out) } -> std::same_as<std::optional<std::string>>;
      { c.is_denial(err) } -> std::same_as<bool>;
    };

}  // namespace bashexec

#if !defined(BASHEXEC_SEPARATE_COMPILATION)
#include "bashexec/impl/confinement.ipp"
#endif
