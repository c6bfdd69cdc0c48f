// detail/engine/background_task: one background task (contract 6, 9, 16,
// 17) — its child, its facts and its read offsets — as a client of the
// executor's reactor. It knows its executor only through `task_host` (told
// when the task settles, asked to wake the reactor), so it lives below the
// executor rather than nested in it.
//
// Threading: every member takes the task's own mutex; the reactor calls the
// client members on its thread. A stop callback (the request's stop token)
// takes only this mutex and, through the host, the reactor's.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>

#include <fmt/core.h>

#include "bashexec/confinement.hpp"
#include "bashexec/detail/engine/child_run.hpp"
#include "bashexec/detail/engine/launch_builder.hpp"
#include "bashexec/detail/engine/reactor.hpp"
#include "bashexec/detail/engine/verdict.hpp"
#include "bashexec/detail/kernel/input_wait_probe.hpp"
#include "bashexec/detail/kernel/no_sigpipe.hpp"
#include "bashexec/detail/kernel/pseudo_terminal.hpp"
#include "bashexec/detail/text/stderr_section.hpp"
#include "bashexec/detail/text/utf8_boundary.hpp"
#include "bashexec/ids.hpp"
#include "bashexec/output.hpp"
#include "bashexec/request.hpp"
#include "bashexec/result.hpp"
#include "bashexec/terminal.hpp"

namespace bashexec::detail {

/// What a background task needs of its executor.
class task_host {
 public:
  /// The task settled with `final_facts` (on the reactor thread, or in
  /// `start` for a spawn that failed); `held` is the memory it keeps.
  /// `tell_listeners` is false for a foreground run's task that settled
  /// before it was handed on: the run reports it.
  virtual void task_settled(task_snapshot final_facts, std::uint64_t serial, std::uint64_t held,
                            bool tell_listeners) = 0;
  /// A task's group is being stopped: the reactor must look at its timers.
  virtual void wake_reactor() = 0;
  /// The task began waiting for input (`facts.input_wait`), once per wait,
  /// on the reactor thread and outside the task's lock.
  virtual void task_waiting(task_snapshot facts) = 0;

 protected:
  ~task_host() = default;
};

template <class Collector, class Confinement>
class background_task final : public reactor::client {
 public:
  background_task(task_host& host, const launch_builder& builder, const Confinement& confinement,
                  const exec_spec& spec, std::optional<owner_token> owner, bool foreground = false)
      : host_(host),
        builder_(builder),
        confinement_(confinement),
        owner_token_(std::move(owner)),
        spec_stdin_(spec.stdin_data),
        cap_(spec.stdout_max_bytes),
        terminal_(builder.config().terminal),
        foreground_(foreground) {
    snapshot_.command = spec.command;
    snapshot_.owner = owner_token_;
  }

  void set_id(const task_id& id, std::uint64_t serial) {
    std::lock_guard lock(mutex_);
    snapshot_.id = id;
    serial_ = serial;
  }

  void begin(process_handle process, prepared_launch launch) {
    snapshot_.sandbox = launch.info;
    snapshot_.containment = launch.containment;
    builder_.start_child(child_, std::move(process), launch, spec_stdin_.value_or(std::string{}), cap_,
                         run_kind::background, std::nullopt);
    try {
      egress_ = builder_.open_egress(launch);
    } catch (...) {
      child_.reset();  // killed and reaped: a command without its proxy never runs on
      throw;
    }
    if (egress_) snapshot_.network.emplace();
    confined_ = std::move(launch.confined);
    spec_stdin_.reset();
    runner_holds_command_ = launch.runner_holds_command();
    if (child_->input_fd() >= 0) {
      // What /proc calls this command's input (the input-wait probe's
      // evidence): the terminal's device, or the stdin pipe's inode.
      if (child_->on_terminal()) {
        input_.terminal = launch.terminal_device;
      } else {
        struct stat info {};
        if (::fstat(child_->input_fd(), &info) == 0) {
          input_.pipe_device = info.st_dev;
          input_.pipe_inode = info.st_ino;
        }
      }
      snapshot_.terminal = child_->on_terminal();
      snapshot_.input_open = true;
      note_activity(clock::now());
    }
  }

  /// The reactor could not take the child: kill and reap it now, and settle
  /// the task as killed with the reason.
  void abandon(std::string_view reason) {
    std::lock_guard lock(mutex_);
    child_.reset();  // child_run's destructor kills the group and reaps the shell
    snapshot_.start_error = fmt::format("the executor could not watch it ({}), so it was killed", reason);
    spawn_error_ = fmt::format("bashexec: could not watch the command: {}\n", reason);
  }

  /// A spawn that failed: the task is settled as killed, the reason in its
  /// stderr; under a confinement that is a runner failure.
  void fail_to_start(std::string_view reason, const prepared_launch& launch, bool confined) {
    snapshot_.start_error = std::string(reason);
    spawn_error_ = fmt::format("bashexec: could not start the command: {}\n", reason);
    snapshot_.sandbox = launch.info;
    snapshot_.containment = launch.containment;
    if (confined) snapshot_.sandbox->runner_failed = true;
  }

  bool running() const { return child_.has_value(); }

  const std::optional<owner_token>& owner() const noexcept { return owner_token_; }

  task_snapshot snapshot() const {
    std::lock_guard lock(mutex_);
    task_snapshot facts = snapshot_;
    if (egress_) facts.network = egress_->snapshot();  // running: the attempts so far
    return facts;
  }

  bool stop(stop_cause cause) {
    std::lock_guard lock(mutex_);
    if (!child_ || child_->settled()) return false;
    return child_->request_stop(cause, clock::now());
  }

  /// A foreground run's task becomes a task like any other (its listeners
  /// told from now on). False when it settled first.
  bool hand_off() {
    std::lock_guard lock(mutex_);
    if (settled_) return false;
    foreground_ = false;
    return true;
  }

  /// Why the task's child was stopped (none while it runs on, or when it
  /// ended by itself).
  stop_cause cause() const {
    std::lock_guard lock(mutex_);
    return child_ ? child_->cause() : stop_cause::none;
  }

  /// The settled task's whole output as a foreground run reports it (the
  /// collectors' `finish`, kept by `stamp`).
  std::pair<collected_output, collected_output> final_output() const {
    std::lock_guard lock(mutex_);
    return {final_out_, final_err_};
  }

  /// Blocks until the task settles or waits for input, at most until
  /// `until`; returns its facts then.
  task_snapshot wait_for_input_or_settled(std::optional<clock::time_point> until) {
    std::unique_lock lock(mutex_);
    auto done = [this] { return settled_ || snapshot_.input_wait.has_value(); };
    if (until)
      settled_cv_.wait_until(lock, *until, done);
    else
      settled_cv_.wait(lock, done);
    return snapshot_;
  }

  /// Writes `bytes` to the task's input (its terminal, or a stdin kept
  /// open): returns how many were taken within the write timeout — fewer
  /// only when the terminal or pipe stayed full that long. Throws
  /// input_closed when the task settled, never had input, or closed it.
  std::size_t write_input(std::string_view bytes) {
    std::size_t done = 0;
    unique_fd target;
    bool terminal = false;
    // Only a pipe raises SIGPIPE: a terminal whose command hung up answers
    // EIO, so its writes skip the signal mask's three system calls.
    auto put = [&terminal](int fd, const char* data, std::size_t size) {
      return terminal ? ::write(fd, data, size) : write_without_sigpipe(fd, data, size);
    };
    {
      // The usual case, at once: all of it fits. Only a write that must
      // wait for room waits on a copy of the descriptor, without the lock.
      std::lock_guard lock(mutex_);
      require_input_locked("write to");
      terminal = child_->on_terminal();
      const ssize_t n = put(child_->input_fd(), bytes.data(), bytes.size());
      if (n > 0) done = static_cast<std::size_t>(n);
      if (done == bytes.size()) {
        note_activity(clock::now());
        return done;
      }
      target = unique_fd(::fcntl(child_->input_fd(), F_DUPFD_CLOEXEC, 3));
      if (!target) throw_syscall("fcntl(F_DUPFD_CLOEXEC) of the task's input");
    }
    const auto until = clock::now() + terminal_.write_timeout;
    while (done < bytes.size()) {
      const ssize_t n = put(target.get(), bytes.data() + done, bytes.size() - done);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()).count();
        if (left <= 0) break;
        pollfd ready{target.get(), POLLOUT, 0};
        ::poll(&ready, 1, static_cast<int>(left));
        continue;
      }
      // EPIPE (nobody reads the pipe any more) or EIO (the terminal hung up).
      if (done == 0)
        throw input_closed(snapshot().id, fmt::format("its input is gone ({})", std::strerror(errno)));
      break;
    }
    std::lock_guard lock(mutex_);
    note_activity(clock::now());
    return done;
  }

  /// End of input: a kept stdin pipe is closed; on a terminal the EOF
  /// character (^D) is typed, which ends a read at the start of a line.
  void close_input() {
    bool terminal = false;
    {
      std::lock_guard lock(mutex_);
      require_input_locked("close the input of");
      terminal = child_->on_terminal();
      if (!terminal) {
        child_->close_input();
        snapshot_.input_open = false;
        note_activity(clock::now());
        return;
      }
    }
    const char eof = terminal_control_character_of(VEOF, '\x04');
    write_input(std::string_view(&eof, 1));
  }

  /// A new window for the task's terminal (SIGWINCH to its foreground).
  void resize(terminal_size size) {
    if (size.rows == 0 || size.columns == 0)
      throw std::invalid_argument(fmt::format("terminal: rows and columns must be positive, got {}x{}", size.rows,
                                              size.columns));
    std::lock_guard lock(mutex_);
    require_input_locked("resize the terminal of");
    if (!child_->on_terminal())
      throw std::invalid_argument(fmt::format("task {} has no terminal to resize", snapshot_.id));
    resize_terminal(child_->input_fd(), size);
  }

  /// What ^C does: SIGINT to the terminal's foreground process group; for a
  /// task on pipes, to its command (the group, or inside a runner's pid
  /// namespace every process but the runner and the namespace's init).
  /// Returns false when the task had settled.
  bool interrupt() {
    std::lock_guard lock(mutex_);
    if (!child_ || child_->settled()) return false;
    pid_t group = child_->on_terminal() && child_->input_fd() >= 0 ? terminal_foreground_group(child_->input_fd()) : -1;
    if (group > 0) {
      ::kill(-group, SIGINT);
    } else if (runner_holds_command_) {
      for (pid_t pid : command_processes(child_->pid())) ::kill(pid, SIGINT);
    } else {
      child_->signal_group(SIGINT);
    }
    note_activity(clock::now());
    return true;
  }

  /// Stops the task when `stop` is requested (contract 9). Call once, with
  /// the registry lock held; the callback may run right here.
  void watch_stop(const std::stop_token& stop) { on_stop_.emplace(stop, stop_relay{this}); }

  /// No stop callback runs after this returns (one in flight is waited
  /// for). Call without holding this task's mutex: the callback takes it.
  void unwatch_stop() { on_stop_.reset(); }

  /// Disposal of a settled task: members that detached from its output
  /// (`daemon >/dev/null &`) and outlived the shell die with the executor.
  void kill_leftovers() {
    std::lock_guard lock(mutex_);
    if (child_ && leftovers_) child_->kill_leftovers();
  }

  std::optional<task_snapshot> wait(std::optional<std::chrono::milliseconds> timeout) {
    std::unique_lock lock(mutex_);
    auto done = [this] { return settled_; };
    if (!timeout)
      settled_cv_.wait(lock, done);
    else if (!settled_cv_.wait_for(lock, *timeout, done))
      return std::nullopt;
    return snapshot_;
  }

  /// What the task printed since the last read (contract 6).
  task_read read() {
    std::lock_guard lock(mutex_);
    if (child_ && !settled_) take_ready_output();
    task_read r;
    r.task = snapshot_;
    if (!child_) {
      if (!spawn_error_read_) append_stderr_section(r.delta, spawn_error_);
      spawn_error_read_ = true;
      return r;
    }
    auto out = child_->out().since(out_offset_);
    auto err = child_->err().since(err_offset_);
    if (!settled_) {
      // The rest of a character split across pipe reads arrives later:
      // keep its first bytes for the next read rather than split it.
      out.bytes.resize(out.bytes.size() - incomplete_utf8_suffix(out.bytes));
      err.bytes.resize(err.bytes.size() - incomplete_utf8_suffix(err.bytes));
    }
    out_offset_ = out.begin + out.bytes.size();
    err_offset_ = err.begin + err.bytes.size();
    r.lossy = out.lossy || err.lossy;
    r.delta = std::move(out.bytes);
    if (!err.bytes.empty()) append_stderr_section(r.delta, err.bytes);
    // A path is named only while the file exists: the spill budget may
    // have removed a settled task's files to make room.
    auto existing = [](std::optional<std::filesystem::path> path) {
      std::error_code ignored;
      if (path && !std::filesystem::exists(*path, ignored)) path.reset();
      return path;
    };
    r.stdout_spill_path = existing(child_->out().spill_path());
    r.stderr_spill_path = existing(child_->err().spill_path());
    return r;
  }

  /// What the command wrote and nobody read yet, read now in the reader's
  /// thread (a read sees what is there without a hop to the reactor
  /// thread; the reactor still owns the streams' ends). Under the lock.
  void take_ready_output() {
    char scratch[16 * 1024];
    bool any = false;
    for (const child_source source : {child_source::out, child_source::err})
      any = child_->read_ready(source, scratch, sizeof scratch) || any;
    if (any) note_activity(clock::now());
  }

  // reactor::client — called on the reactor thread.
  int fd(child_source source) override {
    std::lock_guard lock(mutex_);
    return child_ ? child_->fd(source) : -1;
  }
  void on_event(child_source source, char* scratch, std::size_t size, clock::time_point now) override {
    std::lock_guard lock(mutex_);
    const std::uint64_t before = child_->out().total() + child_->err().total();
    child_->dispatch(source, scratch, size, now);
    if (child_->out().total() + child_->err().total() != before) note_activity(now);
  }
  int parked_fd(child_source source) override {
    std::lock_guard lock(mutex_);
    return child_ ? child_->parked_fd(source) : -1;
  }
  std::optional<clock::time_point> deadline() override {
    std::lock_guard lock(mutex_);
    auto next = child_->next_deadline();
    if (watching_input()) next = next ? std::min(*next, next_look_) : next_look_;
    return next;
  }
  void on_time(clock::time_point now) override {
    std::optional<task_snapshot> began_waiting;
    bool tell = false;
    {
      std::lock_guard lock(mutex_);
      child_->on_time(now);
      if (watching_input() && now >= next_look_ && look_for_input_wait(now)) {
        began_waiting = snapshot_;
        tell = !foreground_;  // a foreground run tells of its own wait once handed on
      }
    }
    if (began_waiting) {
      settled_cv_.notify_all();
      if (tell) host_.task_waiting(std::move(*began_waiting));
    }
  }
  bool settled() override {
    std::lock_guard lock(mutex_);
    return child_->settled();
  }
  void on_failure(const char* reason) noexcept override {
    try {
      abandon(reason);
    } catch (...) {
      std::lock_guard lock(mutex_);
      child_.reset();  // killed and reaped all the same, without the words
    }
  }

  /// Stamps the final facts (contract 17), then hands them to the host
  /// (listeners, then the retention policy).
  void on_settled() override {
    task_snapshot final_facts;
    std::uint64_t held = 0;
    std::uint64_t serial = 0;
    bool tell = true;
    {
      std::lock_guard lock(mutex_);
      stamp();
      settled_ = true;
      final_facts = snapshot_;
      held = memory_held();
      serial = serial_;
      tell = !foreground_;
    }
    settled_cv_.notify_all();
    host_.task_settled(std::move(final_facts), serial, held, tell);
  }

  /// Whether members that detached from the task's output are still live
  /// (a settled task that still has processes is not forgotten: disposal
  /// must reach them). Once they are gone the answer stays no.
  bool holds_live_members() {
    std::lock_guard lock(mutex_);
    if (leftovers_ && !(child_ && child_->has_live_members())) leftovers_ = false;
    return leftovers_;
  }

  /// The retention policy forgot this task: remove its spill files now
  /// (calls in progress on it see the paths withheld); its memory goes
  /// with the last reference.
  void forget_output() {
    std::lock_guard lock(mutex_);
    if (!child_) return;
    for (const auto& path : {child_->out().spill_path(), child_->err().spill_path()})
      if (path) builder_.spills().forget(*path);
  }

 private:
  /// Output or input just happened: a wait (if any) is over, and the next
  /// look comes a quiet period from now.
  void note_activity(clock::time_point now) {
    quiet_since_ = now;
    snapshot_.input_wait.reset();
    look_interval_ = terminal_.quiet;
    next_look_ = now + terminal_.quiet;
  }

  bool watching_input() const {
    return child_ && !child_->settled() && child_->input_fd() >= 0 && !snapshot_.input_wait;
  }

  /// One look at the kernel's evidence (detail/kernel/input_wait_probe.hpp),
  /// once output and input have been quiet; backs off while the command
  /// stays busy. Returns whether the task began waiting.
  bool look_for_input_wait(clock::time_point now) {
    if (now < quiet_since_ + terminal_.quiet) {
      next_look_ = quiet_since_ + terminal_.quiet;
      return false;
    }
    look_interval_ = std::min(look_interval_ * 2, terminal_.max_interval);
    next_look_ = now + look_interval_;
    if (child_->feeding_stdin()) return false;  // stdin_data is still on its way
    // Bytes still in the pipe: the reader is about to wake, not waiting.
    if (int pending = 0; !child_->on_terminal() && ::ioctl(child_->input_fd(), FIONREAD, &pending) == 0 && pending > 0)
      return false;
    const auto reader = probe_input_wait(child_->pid(), input_);
    if (!reader) return false;
    input_wait wait;
    wait.since = std::chrono::system_clock::now();
    wait.prompt = prompt_text();
    wait.pid = reader->pid;
    wait.call = reader->call;
    wait.raw = child_->on_terminal() && terminal_is_raw(child_->input_fd());
    snapshot_.input_wait = std::move(wait);
    return true;
  }

  /// The text after the output's last newline, at most prompt_bytes, cut
  /// on a character boundary.
  std::string prompt_text() const {
    const std::uint64_t total = child_->out().total();
    const std::uint64_t look_back = terminal_.prompt_bytes * 4;
    std::string tail = child_->out().since(total > look_back ? total - look_back : 0).bytes;
    if (const auto newline = tail.rfind('\n'); newline != std::string::npos) tail.erase(0, newline + 1);
    if (tail.size() > terminal_.prompt_bytes) {
      std::size_t cut = tail.size() - terminal_.prompt_bytes;
      while (cut < tail.size() && (static_cast<unsigned char>(tail[cut]) & 0xC0) == 0x80) ++cut;
      tail.erase(0, cut);
    }
    tail.resize(tail.size() - incomplete_utf8_suffix(tail));
    return tail;
  }

  void require_input_locked(std::string_view what) const {
    if (!child_ || child_->settled() || settled_)
      throw input_closed(snapshot_.id, fmt::format("cannot {} it: the task has settled", what));
    if (child_->input_fd() < 0)
      throw input_closed(snapshot_.id, fmt::format("cannot {} it: it takes no input (start it with a terminal or "
                                                   "keep_stdin_open)",
                                                   what));
  }

  char terminal_control_character_of(int which, char fallback) const {
    std::lock_guard lock(mutex_);
    require_input_locked("type into");
    return terminal_control_character(child_->input_fd(), which, fallback);
  }

  std::uint64_t memory_held() const {
    std::uint64_t held = snapshot_.command.capacity() + spawn_error_.capacity();
    if (child_) held += held_bytes(child_->out()) + held_bytes(child_->err());
    return held;
  }

  void stamp() {
    if (!child_) {
      snapshot_.status = task_status::killed;
      return;
    }
    leftovers_ = child_->has_live_members();
    final_out_ = child_->out().finish();  // closes the spill files; the tails stay readable
    final_err_ = child_->err().finish();
    const collected_output& out = final_out_;
    const collected_output& err = final_err_;
    snapshot_.input_wait.reset();
    snapshot_.input_open = false;
    const verdict v = classify(confinement_, confined_, child_->exit(), err.text, out.text);
    const exit_facts exit = v.command_exit.value_or(child_->exit());
    snapshot_.exit_code = exit.exit_code;
    snapshot_.signal = exit.signal;
    snapshot_.status = exit.signal ? task_status::killed : task_status::completed;
    if (v.runner_failure)
      snapshot_.sandbox->runner_failed = true;
    else if (v.denied)
      snapshot_.sandbox->denied = true;
    confined_.reset();  // the status pipe is read; keep no descriptor per settled task
    if (egress_) {
      snapshot_.network = builder_.close_egress(*egress_);
      egress_.reset();
    }
  }

  task_host& host_;
  const launch_builder& builder_;
  const Confinement& confinement_;
  mutable std::mutex mutex_;
  std::condition_variable settled_cv_;
  task_snapshot snapshot_;
  std::optional<owner_token> owner_token_;
  std::optional<std::string> spec_stdin_;
  std::size_t cap_ = 0;
  const terminal_settings& terminal_;
  std::optional<confined_launch> confined_;
  collected_output final_out_;
  collected_output final_err_;
  bool runner_holds_command_ = false;
  bool foreground_ = false;  // a foreground run's, not handed on yet
  // Input waits (terminal.hpp): what the command's input is, when output or
  // input last happened, and when the probe looks next.
  input_identity input_;
  clock::time_point quiet_since_{};
  clock::time_point next_look_{};
  std::chrono::milliseconds look_interval_{};
  std::optional<child_run<Collector>> child_;
  std::unique_ptr<egress_session> egress_;  // allowlist: this task's proxy, until it settles
  std::uint64_t out_offset_ = 0;
  std::uint64_t err_offset_ = 0;
  std::string spawn_error_;
  bool spawn_error_read_ = false;
  bool settled_ = false;
  bool leftovers_ = false;  // live group members when the task settled (until they are gone)
  std::uint64_t serial_ = 0;

  /// Runs inside `request_stop`, on whichever thread asked: it takes only
  /// this task's mutex and the reactor's, never the registry's.
  struct stop_relay {
    background_task* task;
    void operator()() const noexcept {
      try {
        if (task->stop(stop_cause::aborted)) task->host_.wake_reactor();
      } catch (...) {
        // A stop callback must not throw (std::terminate). The group was
        // signalled or it is already gone; kill and disposal remain.
      }
    }
  };
  // Last: unregistered first, while everything the callback uses exists.
  std::optional<std::stop_callback<stop_relay>> on_stop_;
};

}  // namespace bashexec::detail
