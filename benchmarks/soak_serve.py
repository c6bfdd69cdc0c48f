#!/usr/bin/env python3
"""Soak test of `bashexec serve`, run as a benchmark (not in CI).

Starts one `bashexec serve` and drives it from SESSIONS concurrent sessions
for SECONDS, each mixing foreground calls (short, long-output, slow, timed
out, failing), background starts, `bash_output` reads and `bash_kill`s of its
own tasks. Meanwhile it samples the server once a second (resident memory,
descriptors, threads). At the end it closes the server's stdin (the client
is gone, docs/tool-protocol.md) and reports:

  - peak RSS (VmHWM) and RSS at the end, before the server is told to stop;
  - descriptors and threads at the start (warm) and the end, and their peaks;
  - processes alive after the server exited (must be 0): every command the
    server ran inherits a marker variable, found by a /proc scan;
  - spill bytes left under the server's runtime directory (must be 0), and
    no file or directory there but the empty spill parent;
  - calls by kind with their latency (median, 99th percentile) and any
    unexpected error answers.

Exits 1 when a "must" fails, when the server does not exit 0, or when a call
went unanswered. Python standard library only.

  python3 benchmarks/soak_serve.py --cli build/dev/apps/bashexec --seconds 600
  scripts/run-benchmarks.sh with BASHEXEC_SOAK=1 runs it after the suite.
"""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

MARKER_NAME = "BASHEXEC_SOAK_RUN"

# (kind, weight). A session picks one per step; `read` and `kill` fall back
# to a background start while the session has no task.
MIX = [("foreground", 40), ("background", 20), ("read", 25), ("kill", 15)]

FOREGROUND = [
    ("echo hello {n}", None),
    ("seq 1 30000", None),  # ~169 KB: a truncated tail and a spill file
    ("sleep 0.2; echo slept", None),
    ("echo out; echo err >&2; exit 3", None),
    ("sleep 5", 300),  # killed by its 300 ms timeout
    ("(sleep 0.3; echo late) & echo early", None),  # waits for its child's output
]
BACKGROUND = [
    "for i in $(seq 1 20); do echo line $i; sleep 0.1; done",
    "sleep 5",
    "seq 1 50000",  # ~289 KB: lossy reads
    "trap '' TERM; echo trapped; sleep 4",  # a kill has to wait out the grace period
    "head -c 300000 /dev/urandom | base64",
]
MAX_RUNNING_PER_SESSION = 5


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def kib(value):
    return int(value.split()[0])


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def marked_processes(marker):
    """Pids of live processes whose environment carries the marker."""
    needle = f"{MARKER_NAME}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            pass  # gone meanwhile, or a kernel thread
    return found


def tree_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


class Server:
    """One `bashexec serve` on pipes; responses routed to their callers by id."""

    def __init__(self, argv, env):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0,
                                     start_new_session=True)
        self.write_lock = threading.Lock()
        self.lock = threading.Lock()
        self.waiting = {}  # id -> [event, response]
        self.notices = 0
        self.other_lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        buffer = b""
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                with self.lock:
                    if "notice" in message:
                        self.notices += 1
                    elif "id" in message and message["id"] in self.waiting:
                        slot = self.waiting.pop(message["id"])
                        slot[1] = message
                        slot[0].set()
                    else:
                        self.other_lines.append(message)
        with self.lock:  # end of output: nobody waits forever
            for slot in self.waiting.values():
                slot[0].set()
            self.waiting.clear()

    def call(self, request, timeout):
        slot = [threading.Event(), None]
        with self.lock:
            self.waiting[request["id"]] = slot
        data = (json.dumps(request) + "\n").encode()
        with self.write_lock:
            self.proc.stdin.write(data)
        slot[0].wait(timeout)
        return slot[1]

    def close(self):
        self.proc.stdin.close()


class Session(threading.Thread):
    def __init__(self, index, server, deadline, think, stats, seed):
        super().__init__(daemon=True)
        self.name_ = f"soak-{index}"
        self.server = server
        self.deadline = deadline
        self.think = think
        self.stats = stats
        self.random = random.Random(seed)
        self.tasks = []  # ids of its background tasks, newest last
        self.counter = 0

    def request_id(self):
        self.counter += 1
        return f"{self.name_}-{self.counter}"

    def tool(self, kind, tool, args):
        request = {"id": self.request_id(), "session": self.name_, "tool": tool, "args": args}
        started = time.monotonic()
        response = self.server.call(request, timeout=120)
        self.stats.record(kind, time.monotonic() - started, response)
        return response

    def step(self):
        kinds, weights = zip(*MIX)
        kind = self.random.choices(kinds, weights)[0]
        if kind in ("read", "kill") and not self.tasks:
            kind = "background"
        if kind == "background" and len(self.tasks) >= MAX_RUNNING_PER_SESSION:
            kind = "kill"
        if kind == "foreground":
            command, timeout = self.random.choice(FOREGROUND)
            args = {"command": command.format(n=self.counter), "description": "soak foreground"}
            if timeout:
                args["timeoutMs"] = timeout
            self.tool(kind, "bash", args)
        elif kind == "background":
            args = {"command": self.random.choice(BACKGROUND), "description": "soak background",
                    "run_in_background": True}
            response = self.tool(kind, "bash", args)
            text = response.get("text", "") if response else ""
            if text.startswith("started background task "):
                self.tasks.append(text.rsplit(" ", 1)[1])
        elif kind == "read":
            task = self.random.choice(self.tasks)
            response = self.tool(kind, "bash_output", {"task_id": task})
            text = response.get("text", "") if response else ""
            if "[status: running]" not in text:
                self.tasks.remove(task)  # settled (or forgotten): read once more at most
        else:
            task = self.tasks.pop(self.random.randrange(len(self.tasks)))
            self.tool(kind, "bash_kill", {"task_id": task})

    def run(self):
        while time.monotonic() < self.deadline:
            self.step()
            if self.think:
                time.sleep(self.random.uniform(0, 2 * self.think))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latency = collections.defaultdict(list)
        self.unanswered = 0
        self.forgotten = 0
        self.unexpected = []

    def record(self, kind, seconds, response):
        with self.lock:
            if response is None:
                self.unanswered += 1
                return
            self.latency[kind].append(seconds)
            text = response.get("text", "")
            if "was forgotten" in text:
                self.forgotten += 1
            # Error answers the mix provokes on purpose: none. Forgotten reads
            # are expected with a short retention; anything else is a finding.
            elif response.get("is_error") and len(self.unexpected) < 1000:
                self.unexpected.append(text[:300])


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.peak_fds = 0
        self.peak_threads = 0
        self.samples = []

    def sample(self):
        status = proc_status(self.pid)
        fds = descriptors(self.pid)
        threads = int(status["Threads"])
        self.peak_fds = max(self.peak_fds, fds)
        self.peak_threads = max(self.peak_threads, threads)
        return {"rss_kib": kib(status["VmRSS"]), "hwm_kib": kib(status["VmHWM"]), "fds": fds, "threads": threads}

    def run(self):
        while not self.stop.wait(1.0):
            try:
                self.samples.append((time.monotonic(), self.sample()))
            except OSError:
                return


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default=os.environ.get("BASHEXEC_CLI", "build/dev/apps/bashexec"),
                        help="the bashexec program (default: $BASHEXEC_CLI or build/dev/apps/bashexec)")
    parser.add_argument("--seconds", type=float, default=600, help="how long the sessions run (default 600)")
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions (default 50)")
    parser.add_argument("--think-ms", type=float, default=100,
                        help="mean pause between a session's calls, in ms (default 100)")
    parser.add_argument("--mode", default="unconfined",
                        help="unconfined (default: the cheapest, most calls per second), read-only or workspace-write")
    parser.add_argument("--serve-arg", action="append", default=None,
                        help="extra argument for serve, repeatable (default: --retain-age 60s, so that tasks are "
                             "forgotten during the run)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the report as JSON to this file")
    options = parser.parse_args()

    cli = shutil.which(options.cli) or options.cli
    if not os.access(cli, os.X_OK):
        sys.exit(f"soak: no bashexec program at {options.cli} (build the bashexec_cli target, or pass --cli)")
    serve_args = options.serve_arg if options.serve_arg is not None else ["--retain-age", "60s"]
    mode_args = ["--unconfined"] if options.mode == "unconfined" else ["--mode", options.mode]

    marker = uuid.uuid4().hex
    runtime = tempfile.mkdtemp(prefix="bashexec-soak-", dir="/var/tmp")  # spill files and session logs
    workspace = tempfile.mkdtemp(prefix="bashexec-soak-ws-", dir="/var/tmp")
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime, **{MARKER_NAME: marker})
    argv = [cli, "serve", *mode_args, "--workdir", workspace, *serve_args]
    print(f"soak: {' '.join(argv)}")
    print(f"soak: {options.sessions} sessions for {options.seconds:g} s; machine: {os.cpu_count()} cores, "
          f"load {open('/proc/loadavg').read().split()[:3]}")

    server = Server(argv, env)
    pid = server.proc.pid
    stats = Stats()
    try:
        # Warm: one call of each tool kind before the start figures.
        warm = Session(-1, server, 0, 0, Stats(), options.seed)
        warm.tool("foreground", "bash", {"command": "echo warm", "description": "warm"})
        start_sample = Sampler(pid).sample()
        sampler = Sampler(pid)
        sampler.start()
        began = time.monotonic()
        deadline = began + options.seconds
        sessions = [Session(i, server, deadline, options.think_ms / 1000, stats, options.seed * 1000 + i)
                    for i in range(options.sessions)]
        for s in sessions:
            s.start()
        for s in sessions:
            s.join()
        elapsed = time.monotonic() - began
        sampler.stop.set()
        sampler.join()
        end_sample = sampler.sample()
        alive_before_exit = len(marked_processes(marker))
    finally:
        closed = time.monotonic()
        server.close()
        try:
            status = server.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(pid, signal.SIGKILL)
            status = server.proc.wait()
    exit_seconds = time.monotonic() - closed
    server.reader.join(timeout=10)

    alive_after = marked_processes(marker)
    spill_left = tree_bytes(runtime)
    # The spill parent (<runtime>/bashexec) may stay, empty; nothing else.
    leftovers = sorted(os.path.relpath(os.path.join(d, n), runtime)
                       for d, dirs, files in os.walk(runtime) for n in dirs + files)
    leftovers = [p for p in leftovers if p != "bashexec"]
    shutil.rmtree(runtime, ignore_errors=True)
    shutil.rmtree(workspace, ignore_errors=True)

    calls = {kind: {"count": len(v), "median_ms": round(statistics.median(v) * 1000, 1),
                    "p99_ms": round(percentile(v, 0.99) * 1000, 1)}
             for kind, v in sorted(stats.latency.items())}
    report = {
        "seconds": round(elapsed, 1),
        "sessions": options.sessions,
        "argv": argv,
        "calls": calls,
        "calls_total": sum(c["count"] for c in calls.values()),
        "notices": server.notices,
        "forgotten_answers": stats.forgotten,
        "unanswered": stats.unanswered,
        "unexpected_errors": len(stats.unexpected),
        "rss_kib": {"start": start_sample["rss_kib"], "end": end_sample["rss_kib"], "peak": end_sample["hwm_kib"]},
        "descriptors": {"start": start_sample["fds"], "end": end_sample["fds"], "peak": sampler.peak_fds},
        "threads": {"start": start_sample["threads"], "end": end_sample["threads"], "peak": sampler.peak_threads},
        "processes_alive_at_end_before_exit": alive_before_exit,
        "server_exit_status": status,
        "server_exit_seconds": round(exit_seconds, 2),
        "processes_alive_after_exit": len(alive_after),
        "spill_bytes_left": spill_left,
        "runtime_entries_left": leftovers,
    }
    print(f"soak: {report['calls_total']} calls in {report['seconds']} s, {report['notices']} notices, "
          f"{report['forgotten_answers']} answers about forgotten tasks")
    for kind, c in calls.items():
        print(f"  {kind:<11} {c['count']:>7} calls   median {c['median_ms']:>8} ms   p99 {c['p99_ms']:>8} ms")
    r, d, t = report["rss_kib"], report["descriptors"], report["threads"]
    print(f"  RSS         start {r['start'] / 1024:.1f} MiB, end {r['end'] / 1024:.1f} MiB, peak {r['peak'] / 1024:.1f} MiB")
    print(f"  descriptors start {d['start']}, end {d['end']}, peak {d['peak']}")
    print(f"  threads     start {t['start']}, end {t['end']}, peak {t['peak']}")
    print(f"  processes alive after exit: {len(alive_after)} (must be 0); spill bytes left: {spill_left} (must be 0)")
    print(f"  serve exited {status} {exit_seconds:.2f} s after its stdin closed; unanswered calls: {stats.unanswered}; "
          f"unexpected error answers: {len(stats.unexpected)}")
    for text in collections.Counter(stats.unexpected).most_common(5):
        print(f"    {text[1]} x {text[0]!r}")
    if options.json:
        with open(options.json, "w") as f:
            json.dump(report, f, indent=2)

    failed = alive_after or spill_left or leftovers or status != 0 or stats.unanswered or stats.unexpected
    if failed:
        print("soak: FAILED", file=sys.stderr)
        return 1
    print("soak: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
