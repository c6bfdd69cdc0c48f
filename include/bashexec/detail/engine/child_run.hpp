// detail/engine/child_run: the life of one spawned child as a state machine that
// any event loop can drive — the foreground `run` (poll in the caller's
// thread) and the background reactor (epoll) share it.
//
// It reads both output pipes into their collectors, feeds stdin, reaps the
// shell through its pidfd, and stops the process group on request:
// SIGTERM, SIGKILL after the grace period, and SIGKILL again until no live
// member of the group is left (contract 4). After the shell exits it waits
// for end of file on the pipes at most `drain` before stopping the group
// (a backgrounded grandchild must not hang a foreground run), and stops any
// member still alive then, so a foreground run leaves nothing behind.
//
// "Still running" is the kernel's fact, read from /proc right before the
// decision (process_group.hpp): a zombie, or a process already exiting
// (PF_EXITING), is not a leftover. End of file arrives when the last holder
// of a pipe closes it, and a process closes its files on its way out a
// moment before it becomes a zombie — so a member seen in that moment has
// exited by itself. The run then waits (bounded) for such members to finish
// exiting, and the `leftovers` cause (the marker the model reads) is
// recorded only when a running member was there to be stopped.
//
// With a cgroup (cgroup containment, detail/engine/executor_cgroup.hpp) "the
// group" means both: the process group and every process in the cgroup,
// which setsid cannot leave. SIGTERM goes to both (to the cgroup's members
// one by one), the SIGKILL rounds add cgroup.kill, and "no live member" also
// needs cgroup.events to say "populated 0". Without one nothing here costs
// an extra system call.
//
// A runner that holds the command in its pid namespace (bwrap: its outer
// process leads the group, the namespace's init and the command are its
// children) dies of the SIGTERM; a namespace init ignores a SIGTERM from
// outside. Normally the init's parent-death signal then kills the
// namespace, but the init sets it only once the sandbox is built: a SIGTERM
// that lands during bwrap's start-up leaves an init that goes on to start
// the command, born after the SIGTERM. So once the runner is gone during a
// stop, what is left gets SIGKILL at once — nothing could give it a grace
// any more (`stop_timing::runner_holds_command`).
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "bashexec/detail/engine/executor_cgroup.hpp"
#include "bashexec/detail/kernel/no_sigpipe.hpp"
#include "bashexec/detail/kernel/pidfd.hpp"
#include "bashexec/detail/kernel/process_group.hpp"
#include "bashexec/process_handle.hpp"

namespace bashexec::detail {

using clock = std::chrono::steady_clock;

/// Why a child was stopped; the first cause wins (contract 3).
enum class stop_cause { none, timed_out, aborted, killed, leftovers, disposal };

struct stop_timing {
  std::chrono::milliseconds grace{3000};
  /// After the shell exits: how long descendants may hold the pipes before
  /// the group is stopped. Empty: as long as they like (background tasks,
  /// where `server &` is the point).
  std::optional<std::chrono::milliseconds> drain{2000};
  /// Stop what is left of the group once the shell exited and the pipes
  /// closed (a foreground run leaves no process behind).
  bool stop_leftovers = true;
  /// The spawned process is a runner whose pid namespace holds the command
  /// (bwrap): a stop that finds it gone sends SIGKILL at once.
  bool runner_holds_command = false;
};

/// The parent's ends of a child's pipes (non-blocking, close-on-exec).
/// On a terminal `out` is the master (stdout and stderr merged; `err` is
/// closed) and `in`, when there is `stdin_data`, a copy of it.
struct parent_pipes {
  unique_fd in;
  unique_fd out;
  unique_fd err;
  /// Where later input goes (`write_input`) on a stdin pipe kept open: its
  /// write end. Never watched by an event loop: writes happen in the
  /// caller's thread, bounded (background_task.hpp). On a terminal input
  /// goes to `out`, the master, itself: a second descriptor of it would keep
  /// the master in the reactor's epoll set after `out` closed, and the
  /// level-triggered hang-up polled there in a loop contends with the
  /// command's own exit (measured: its exit took a jiffy longer).
  unique_fd input;
  /// `out` is a terminal's master.
  bool terminal = false;
};

enum class child_source { out, err, in, exit };

template <class Collector>
class child_run {
 public:
  child_run(process_handle process, parent_pipes pipes, std::string stdin_data, Collector out, Collector err,
            stop_timing timing, std::optional<clock::time_point> timeout_at,
            std::optional<cgroup_lease> contained = std::nullopt)
      : process_(std::move(process)),
        pipes_(std::move(pipes)),
        stdin_data_(std::move(stdin_data)),
        out_(std::move(out)),
        err_(std::move(err)),
        timing_(timing),
        timeout_at_(timeout_at),
        cgroup_(std::move(contained)) {
    if (pipes_.in && stdin_data_.empty()) pipes_.in.reset();  // an empty stdin is at EOF at once
    if (cgroup_) cgroup_->close_procs_fd();  // the child joined before exec
  }

  child_run(const child_run&) = delete;
  child_run& operator=(const child_run&) = delete;

  /// A run abandoned before it settled (an exception between spawn and
  /// settlement): kill what is left and reap the shell, so neither a process
  /// nor a zombie outlives it.
  ~child_run() {
    if (settled_) return;
    signal_members(SIGKILL);
    process_.wait_blocking();
  }

  /// The descriptor to watch for `source`, or -1 when it is closed.
  int fd(child_source source) const noexcept {
    switch (source) {
      case child_source::out: return pipes_.out.get();
      case child_source::err: return pipes_.err.get();
      case child_source::in: return pipes_.in.get();
      case child_source::exit: return process_.pidfd();
    }
    return -1;
  }

  /// Reads what the pipe holds (bounded per call, so one chatty child cannot
  /// starve the others of a shared loop). End of file closes it.
  void on_readable(child_source source, char* scratch, std::size_t size, clock::time_point now) {
    unique_fd& pipe = source == child_source::out ? pipes_.out : pipes_.err;
    Collector& sink = source == child_source::out ? out_ : err_;
    for (int round = 0; round < 16 && pipe; ++round) {
      ssize_t n = ::read(pipe.get(), scratch, size);
      if (n > 0) {
        sink.append(scratch, static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < size) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      // EOF or a read error: the stream is over. A terminal's master (EIO:
      // every slave descriptor is closed) stays open, parked, until the
      // run settles: closing it would hang up the terminal, and SIGHUP
      // kill a command that only closed its descriptors.
      if (source == child_source::out && pipes_.terminal)
        parked_master_ = std::move(pipe);
      else
        pipe.reset();
    }
    update(now);
  }

  /// Reads what `source`'s stream holds right now, in the caller's thread,
  /// and nothing more: its end of file is left for the event loop that
  /// watches it (which parks a terminal's master or closes a pipe and
  /// takes it out of its set). A task's reader takes its output this way
  /// instead of waiting for the loop's thread to wake and read it first.
  /// Returns whether anything was read.
  bool read_ready(child_source source, char* scratch, std::size_t size) {
    unique_fd& pipe = source == child_source::out ? pipes_.out : pipes_.err;
    Collector& sink = source == child_source::out ? out_ : err_;
    bool any = false;
    for (int round = 0; round < 16 && pipe; ++round) {
      const ssize_t n = ::read(pipe.get(), scratch, size);
      if (n > 0) {
        sink.append(scratch, static_cast<std::size_t>(n));
        any = true;
        if (static_cast<std::size_t>(n) < size) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // EAGAIN, end of file or an error: the loop's to handle
    }
    return any;
  }

  /// A descriptor this run stopped reading but keeps open (a terminal's
  /// master after its output ended): an event loop removes it from its
  /// set, since it stays ready (hung up) for as long as it is open. -1 when
  /// there is none for `source`.
  int parked_fd(child_source source) const noexcept {
    return source == child_source::out ? parked_master_.get() : -1;
  }

  void on_writable(clock::time_point now) {
    while (pipes_.in && stdin_offset_ < stdin_data_.size()) {
      ssize_t n = write_without_sigpipe(pipes_.in.get(), stdin_data_.data() + stdin_offset_,
                                        stdin_data_.size() - stdin_offset_);
      if (n > 0) {
        stdin_offset_ += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      break;  // EPIPE: the child stopped reading; that is its business
    }
    pipes_.in.reset();
    std::string().swap(stdin_data_);
    update(now);
  }

  /// The pidfd became readable: the shell exited.
  void on_exit_signalled(clock::time_point now) {
    if (auto facts = process_.try_reap()) {
      exit_ = *facts;
      exited_ = true;
      exited_at_ = now;
      if (cause_ != stop_cause::none && timing_.runner_holds_command && !kill_sent_) escalate(now);
    }
    update(now);
  }

  /// Hands one ready event of `source` to its handler: the one dispatch the
  /// foreground loop and the reactor share.
  void dispatch(child_source source, char* scratch, std::size_t size, clock::time_point now) {
    if (source == child_source::in)
      on_writable(now);
    else if (source == child_source::exit)
      on_exit_signalled(now);
    else
      on_readable(source, scratch, size, now);
  }

  /// Starts stopping the group for `cause` unless a cause was recorded
  /// already. Returns whether this call's cause was the one recorded.
  bool request_stop(stop_cause cause, clock::time_point now) {
    if (settled_ || cause_ != stop_cause::none) return false;
    cause_ = cause;
    group_check_at_ = now;
    if (exited_ && timing_.runner_holds_command) {
      escalate(now);  // the runner is gone already: no one left to give a grace
    } else {
      signal_members(SIGTERM);
      kill_at_ = now + timing_.grace;
    }
    update(now);
    return true;
  }

  /// Timers: the run's timeout, the SIGKILL escalation, the drain limit.
  void on_time(clock::time_point now) {
    if (settled_) return;
    if (cause_ == stop_cause::none && timeout_at_ && now >= *timeout_at_) request_stop(stop_cause::timed_out, now);
    if (cause_ != stop_cause::none && now >= kill_at_) escalate(now);
    update(now);
  }

  std::optional<clock::time_point> next_deadline() const {
    if (settled_) return std::nullopt;
    std::optional<clock::time_point> next;
    auto consider = [&next](clock::time_point t) { next = next ? std::min(*next, t) : t; };
    if (cause_ == stop_cause::none) {
      if (timeout_at_) consider(*timeout_at_);
      if (exited_ && timing_.drain) consider(exited_at_ + *timing_.drain);
      if (exit_wait_until_) consider(group_check_at_);
    } else {
      consider(kill_at_);
      if (exited_) consider(group_check_at_);
    }
    return next;
  }

  bool settled() const noexcept { return settled_; }
  pid_t pid() const noexcept { return process_.pid(); }
  /// The descriptor later input is written to; -1 when there is none
  /// (on a terminal: once its output ended, nobody could read it anyway).
  int input_fd() const noexcept { return pipes_.terminal ? pipes_.out.get() : pipes_.input.get(); }
  /// Closes a kept stdin pipe: the command reads end of file.
  void close_input() noexcept { pipes_.input.reset(); }
  bool on_terminal() const noexcept { return pipes_.terminal; }
  /// One signal to the spawned process's group (an interrupt, not a stop).
  void signal_group(int signo) const noexcept { process_.signal_group(signo); }
  /// `stdin_data` is still being written (later input would interleave).
  bool feeding_stdin() const noexcept { return static_cast<bool>(pipes_.in); }
  stop_cause cause() const noexcept { return cause_; }
  const exit_facts& exit() const noexcept { return exit_; }
  Collector& out() noexcept { return out_; }
  Collector& err() noexcept { return err_; }
  const Collector& out() const noexcept { return out_; }
  const Collector& err() const noexcept { return err_; }

  /// Whether a live (non-zombie) member of the group — or a process of the
  /// cgroup — is left.
  bool has_live_members() const noexcept {
    return (cgroup_ && cgroup_->populated()) || group_has_live_members(process_.pid());
  }

  /// Disposal of a settled child: SIGKILL whatever is left of it.
  void kill_leftovers() noexcept {
    if (group_has_live_members(process_.pid())) process_.signal_group(SIGKILL);
    if (cgroup_ && cgroup_->populated()) cgroup_->kill();
  }

 private:
  /// One SIGKILL round; the first starts the bound on how long members stuck
  /// in the kernel may take.
  void escalate(clock::time_point now) noexcept {
    if (!kill_sent_) give_up_at_ = now + timing_.grace;
    kill_sent_ = true;
    signal_members(SIGKILL);  // again each round: a member may have forked meanwhile
    kill_at_ = now + std::chrono::milliseconds(10);
  }

  void signal_members(int signo) noexcept {
    process_.signal_group(signo);
    if (cgroup_) {
      if (signo == SIGKILL)
        cgroup_->kill();
      else
        cgroup_->signal_members(signo);
    }
    // A stopped member (`kill -STOP $$`) would sit on its SIGTERM until the
    // SIGKILL: wake it so it gets its grace.
    if (signo == SIGTERM) signal_members(SIGCONT);
  }

  /// The group's members, and the cgroup's too under cgroup containment.
  member_census census() const noexcept {
    member_census members = census_group(process_.pid());
    if (cgroup_ && !members.running) members |= cgroup_->census();
    return members;
  }

  void update(clock::time_point now) {
    if (settled_ || process_.unreaped()) return;  // the shell has not been reaped yet
    if (cause_ == stop_cause::none) {
      const bool at_eof = !pipes_.out && !pipes_.err;
      const bool drain_over = timing_.drain && now >= exited_at_ + *timing_.drain;
      if (!at_eof && !drain_over) return;
      // The shell is reaped and the pipes are at end of file or the drain is
      // over: what is left is a leftover only if it is running right now.
      // Past the drain, pipes still open with no running member are held by
      // a member on its way out (or one outside the group): nothing to stop.
      if (drain_over || timing_.stop_leftovers) {
        const member_census members = census();
        if (members.running) {
          request_stop(stop_cause::leftovers, now);
          return;
        }
        // Members on their way out: let them finish exiting (bounded), so
        // the run still leaves nothing behind.
        if (members.exiting && timing_.stop_leftovers) {
          if (!exit_wait_until_) exit_wait_until_ = now + exit_wait;
          if (now < *exit_wait_until_) {
            group_check_at_ = now + std::chrono::milliseconds(2);
            return;
          }
        }
      }
      return finish();
    }
    // Stopping: settled once no live member of the group is left, whoever
    // still holds the pipes (a member that escaped the group, say).
    if (now < group_check_at_) return;
    if (!has_live_members() || (kill_sent_ && now >= give_up_at_)) return finish();
    group_check_at_ = now + std::chrono::milliseconds(10);
  }

  void finish() {
    // Whatever is still buffered in the pipes belongs to the output; bounded,
    // since a process outside the group may still be writing.
    char scratch[16384];
    for (auto source : {child_source::out, child_source::err}) {
      unique_fd& pipe = source == child_source::out ? pipes_.out : pipes_.err;
      Collector& sink = source == child_source::out ? out_ : err_;
      for (int round = 0; round < 64 && pipe; ++round) {
        ssize_t n = ::read(pipe.get(), scratch, sizeof scratch);
        if (n > 0) {
          sink.append(scratch, static_cast<std::size_t>(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
      }
      pipe.reset();
    }
    pipes_.in.reset();
    pipes_.input.reset();
    parked_master_.reset();
    // An empty cgroup goes back to the executor's free list at once; one
    // that still holds detached members (a background task's `daemon &`)
    // goes with this object, after disposal killed them.
    if (cgroup_ && !cgroup_->populated()) cgroup_.reset();
    settled_ = true;
  }

  process_handle process_;
  parent_pipes pipes_;
  unique_fd parked_master_;  // see parked_fd
  std::string stdin_data_;
  std::size_t stdin_offset_ = 0;
  Collector out_;
  Collector err_;
  stop_timing timing_;
  std::optional<clock::time_point> timeout_at_;
  std::optional<cgroup_lease> cgroup_;

  exit_facts exit_;
  bool exited_ = false;
  clock::time_point exited_at_{};
  stop_cause cause_ = stop_cause::none;
  clock::time_point kill_at_{};
  clock::time_point group_check_at_{};
  clock::time_point give_up_at_{};
  bool kill_sent_ = false;
  bool settled_ = false;
  /// How long members on their way out may take to finish exiting before a
  /// run settles without them (a process tearing down a large address
  /// space, say); they are not leftovers either way.
  static constexpr std::chrono::milliseconds exit_wait{1000};
  std::optional<clock::time_point> exit_wait_until_;
};

}  // namespace bashexec::detail
