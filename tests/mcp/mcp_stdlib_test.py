#!/usr/bin/env python3
"""Drives `bashexec mcp` with Python's standard library only (subprocess +
json), as a harness in another language would, and attacks the JSON-RPC
layer with what the SDK never sends: every protocol version, messages before
initialize, batches, malformed and oversized lines, ids of every JSON type,
stray notifications and cancellations, end of input with work running.

Usage: mcp_stdlib_test.py BASHEXEC WORKDIR. Prints each check; exits 1 when
one failed or did not run."""
import json
import os
import select
import shutil
import subprocess
import sys
import time

from checklist import Checklist

BASHEXEC, WORK = sys.argv[1], sys.argv[2]
WORKDIR = os.path.join(WORK, f"mcp-stdlib-{os.getpid()}")
shutil.rmtree(WORKDIR, ignore_errors=True)
os.makedirs(WORKDIR)
TAG = f"{os.getpid()}{int(time.time()) % 100000}"

EXPECTED = [
    "version negotiation",
    "requests before initialize",
    "malformed input",
    "ids of any type",
    "notifications never answered",
    "batches only under 2025-03-26",
    "cancellation without a response",
    "elicitation over raw JSON-RPC",
    "the approval question shows the whole command",
    "a cancelled background start leaves nothing running",
    "ids echoed exactly as sent",
    "tasks over raw JSON-RPC",
    "end of input",
]


checks = Checklist(EXPECTED)
check = checks.check


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([BASHEXEC, "mcp", "--workdir", WORKDIR, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.buffer = b""

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message):
        self.send_raw(json.dumps(message).encode() + b"\n")

    def read(self, timeout=20.0):
        """The next message, or None when none arrives in time."""
        line = self.read_raw(timeout)
        return None if line is None else json.loads(line)

    def read_raw(self, timeout=20.0):
        """The next line as bytes, or None when none arrives in time."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def response(self, id, timeout=20.0):
        """The response to `id`, skipping notifications (kept in self.notes)."""
        while True:
            message = self.read(timeout)
            if message is None or (isinstance(message, list) or "method" not in message):
                return message
            self.notes.append(message)

    notes = []

    def request(self, id, method, params=None):
        message = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(id)

    def initialize(self, version="2025-11-25", capabilities=None):
        result = self.request(0, "initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                                "clientInfo": {"name": "stdlib-test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def close(self, timeout=20):
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


section = checks.begin


def bash(command, **extra):
    return {"name": "bash", "arguments": {"command": command, "description": "test", **extra}}


def alive(needle):
    return subprocess.run(["pgrep", "-f", needle], capture_output=True).returncode == 0


def wait_until(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


section("version negotiation")
for asked, answered in [("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"), ("2025-06-18", "2025-06-18"),
                        ("2025-11-25", "2025-11-25"), ("1999-01-01", "2025-11-25")]:
    s = Server()
    r = s.initialize(asked)
    check(f"initialize {asked} answers {answered}", r and r["result"]["protocolVersion"] == answered, r)
    tools = s.request(1, "tools/list")["result"]["tools"]
    has_annotations = all("annotations" in t for t in tools)
    check(f"tools/list under {asked}: annotations only from 2025-03-26", has_annotations == (answered >= "2025-03-26"))
    has_output_schema = all("outputSchema" in t for t in tools) and len(tools) == 4
    check(f"tools/list under {asked}: an outputSchema on every tool only from 2025-06-18",
          has_output_schema == (answered >= "2025-06-18") and (has_output_schema or all("outputSchema" not in t for t in tools)))
    call = s.request(2, "tools/call", bash("exit 4"))["result"]
    check(f"tools/call under {asked}: structuredContent only from 2025-06-18",
          ("structuredContent" in call) == (answered >= "2025-06-18"), call)
    if "structuredContent" in call:
        facts = call["structuredContent"]
        schema = tools[0]["outputSchema"]
        check(f"tools/call under {asked}: structuredContent holds exactly the outputSchema's keys",
              sorted(facts) == sorted(schema["required"]) == sorted(schema["properties"]), facts)
        check(f"tools/call under {asked}: the exit code is a fact", facts["exit_code"] == 4, facts)
    again = s.request(3, "initialize", {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}})
    check(f"a second initialize under {asked} is an invalid request", again["error"]["code"] == -32600, again)
    check(f"exit 0 after end of input ({asked})", s.close() == 0)

section("requests before initialize")
s = Server()
r = s.request("early", "tools/list")
check("tools/list before initialize: -32600 with the id kept", r["id"] == "early" and r["error"]["code"] == -32600, r)
r = s.request(7, "ping")
check("ping before initialize is answered", r == {"jsonrpc": "2.0", "id": 7, "result": {}}, r)
r = s.request(8, "initialize", {"capabilities": {}})
check("initialize without protocolVersion: -32602", r["error"]["code"] == -32602, r)
check("initialize after that works", s.initialize()["result"]["protocolVersion"] == "2025-11-25")

section("malformed input")
s.send_raw(b"{not json\n")
r = s.response(None)
check("malformed JSON: -32700, id null", r["error"]["code"] == -32700 and r["id"] is None, r)
s.send_raw(b'{"jsonrpc":"2.0","id":3,"method":"ping","x":"\xff"}\n')
r = s.response(None)
check("invalid UTF-8: -32700", r["error"]["code"] == -32700, r)
s.send_raw(b'{"jsonrpc":"2.0","id":4,"method":"ping","params":' + b"[" * 100 + b"]" * 100 + b"}\n")
r = s.response(4)
check("nesting over 64 levels: -32600 with the id", r["error"]["code"] == -32600 and r["id"] == 4, r)
s.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"ping","pad":"' + b"x" * (17 << 20) + b'"}\n')
r = s.response(5)
check("a line over 16 MiB: -32600 with the id", r["error"]["code"] == -32600 and r["id"] == 5, r)
r = s.request(6, "no/such/method")
check("unknown method: -32601", r["error"]["code"] == -32601 and r["id"] == 6, r)
s.send({"id": 9, "method": "ping"})
r = s.response(9)
check("no jsonrpc member: -32600", r["error"]["code"] == -32600, r)
s.send_raw(b"42\n")
r = s.response(None)
check("a bare number: -32600", r["error"]["code"] in (-32600, -32700), r)
r = s.request(10, "tools/call", {"arguments": {}})
check("tools/call without a name: -32602", r["error"]["code"] == -32602, r)
r = s.request(11, "tools/call", {"name": "bash", "arguments": "ls"})
check("arguments not an object: an isError tool result", r["result"]["isError"] is True, r)
r = s.request(12, "logging/setLevel", {"level": "loud"})
check("unknown log level: -32602", r["error"]["code"] == -32602, r)

section("ids of any type")
for id in ["a string", -3, 2**62, "", "\u00e9\u4e2d"]:
    r = s.request(id, "ping")
    check(f"id {id!r} kept", r.get("id") == id and "result" in r, r)
for id in [{"nested": [1, 2]}, [1], 1.5, True, None]:
    r = s.request(id, "ping")
    check(f"id {id!r}: -32600, the id echoed", r.get("id") == id and r["error"]["code"] == -32600, r)

section("notifications never answered")
s.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
s.send({"jsonrpc": "2.0", "method": "no/such/method"})
s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "never-sent"}})
s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "malformed"})
r = s.request("after", "ping")
check("no answer to notifications or to a cancellation of an unknown id", r == {"jsonrpc": "2.0", "id": "after", "result": {}}, r)
check("exit 0", s.close() == 0)

section("batches only under 2025-03-26")
s = Server()
s.initialize("2025-03-26")
s.send([{"jsonrpc": "2.0", "id": "b1", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "id": "b2", "method": "tools/call", "params": bash("echo batched")}])
r = s.response(None)
check("2025-03-26: one array answers the batch's requests",
      isinstance(r, list) and sorted(m["id"] for m in r) == ["b1", "b2"], r)
s.send([])
r = s.response(None)
check("2025-03-26: an empty batch is an invalid request", r["error"]["code"] == -32600, r)
s.send([{"jsonrpc": "2.0", "method": "notifications/whatever"}])
r = s.request("x", "ping")
check("2025-03-26: a batch of notifications gets no answer", r["id"] == "x", r)
check("exit 0", s.close() == 0)
for version in ["2025-06-18", "2025-11-25"]:
    s = Server()
    s.initialize(version)
    s.send([{"jsonrpc": "2.0", "id": "b1", "method": "ping"}])
    r = s.response(None)
    check(f"{version}: a batch is refused with -32600", isinstance(r, dict) and r["error"]["code"] == -32600, r)
    s.close()

section("cancellation without a response")
s = Server()
s.initialize()
needle = f"sleep 5{TAG}"
s.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": bash(needle)})
check("the sleep runs", wait_until(lambda: alive(needle), 10))
s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long", "reason": "test"}})
check("the sleep is killed", wait_until(lambda: not alive(needle), 10))
r = s.request("next", "ping")
check("no response to the cancelled call", r["id"] == "next", r)
time.sleep(0.3)
s.send({"jsonrpc": "2.0", "id": "last", "method": "ping"})
r = s.response("last")
check("still none later", r["id"] == "last", r)
check("exit 0", s.close() == 0)

section("elicitation over raw JSON-RPC")
s = Server()
s.initialize("2025-06-18", {"elicitation": {}})
s.send({"jsonrpc": "2.0", "id": "esc", "method": "tools/call",
        "params": bash(f"touch {WORKDIR}/raw", sandbox_permissions="workspace-write", justification="raw test")})
question = s.read()
check("elicitation/create arrives", question and question.get("method") == "elicitation/create", question)
check("2025-06-18: no mode field", "mode" not in question["params"])
check("the form asks one boolean", question["params"]["requestedSchema"]["properties"]["approve"]["type"] == "boolean")
s.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"approve": True}}})
r = s.response("esc")
check("accepted: the command ran", r["result"]["isError"] is False and os.path.exists(f"{WORKDIR}/raw"), r)
s.send({"jsonrpc": "2.0", "id": "esc2", "method": "tools/call",
        "params": bash(f"touch {WORKDIR}/raw2", sandbox_permissions="workspace-write", justification="raw test")})
question = s.read()
s.send({"jsonrpc": "2.0", "id": question["id"], "error": {"code": -32603, "message": "no UI"}})
r = s.response("esc2")
check("an error answer is unavailable", "approval is unavailable" in r["result"]["content"][0]["text"], r)
s.send({"jsonrpc": "2.0", "id": "esc3", "method": "tools/call",
        "params": bash(f"touch {WORKDIR}/raw3", sandbox_permissions="workspace-write", justification="raw test")})
question = s.read()
s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "esc3"}})
withdrawn = s.read()
check("cancelling the call withdraws the question", withdrawn and withdrawn.get("method") == "notifications/cancelled"
      and withdrawn["params"]["requestId"] == question["id"], withdrawn)
r = s.request("p", "ping")
check("and the cancelled call is not answered", r["id"] == "p", r)
check("nothing ran", not os.path.exists(f"{WORKDIR}/raw2") and not os.path.exists(f"{WORKDIR}/raw3"))
s.close()
s = Server()
s.initialize("2025-11-25", {"elicitation": {"url": {}}})
r = s.request("u", "tools/call", bash("true", sandbox_permissions="workspace-write", justification="j"))
check("2025-11-25 url-only elicitation: unavailable, no question", "approval is unavailable" in r["result"]["content"][0]["text"], r)
s.close()
s = Server("--approve", "always")
s.initialize("2025-06-18", {"elicitation": {}})
r = s.request("a", "tools/call", bash(f"touch {WORKDIR}/always", sandbox_permissions="workspace-write", justification="j"))
check("--approve always overrides elicitation", r["result"]["isError"] is False and os.path.exists(f"{WORKDIR}/always"), r)
s.close()

section("the approval question shows the whole command")
s = Server()
s.initialize("2025-06-18", {"elicitation": {}})
hidden = f"{WORKDIR}/HIDDEN"
command = f"ls\ntouch {hidden} # \u202e\u200b\x01\\ \ufeffend"
s.send({"jsonrpc": "2.0", "id": "two", "method": "tools/call",
        "params": bash(command, sandbox_permissions="workspace-write", justification="j\u202e\nk")})
question = s.read()
message = question["params"]["message"] if question and question.get("method") == "elicitation/create" else ""
check("every line of the command is in the question", "1 | ls\n2 | touch " in message and "(2 lines" in message, message)
check("RLO, zero-width, controls, BOM and the backslash are escaped",
      f"2 | touch {hidden} # \\u{{202E}}\\u{{200B}}\\x01\\\\ \\u{{FEFF}}end" in message, message)
check("no hidden character reaches the person", not any(c in message for c in "\u202e\u200b\x01\ufeff"), message)
check("the justification stays on one line, escaped", "Justification: j\\u{202E}\\nk" in message, message)
s.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}})
r = s.response("two")
check("declined: the command did not run", r["result"]["isError"] is True and not os.path.exists(hidden), r)
huge = "true #" + "x" * (1 << 20)
s.send({"jsonrpc": "2.0", "id": "huge", "method": "tools/call",
        "params": bash(huge, sandbox_permissions="workspace-write", justification="j")})
r = s.read()
asked = r is not None and r.get("method") == "elicitation/create"
check("a 1 MiB command: nobody is asked", not asked, r and str(r)[:300])
if asked:
    s.send({"jsonrpc": "2.0", "id": r["id"], "result": {"action": "decline"}})
    r = s.response("huge")
check("a 1 MiB command is refused for approval as too long to show", r and r["result"]["isError"] is True
      and "too long to show a person for approval" in r["result"]["content"][0]["text"], r and str(r)[:300])
s.close()

section("a cancelled background start leaves nothing running")
s = Server()
s.initialize()
for attempt, delay in enumerate([0, 0, 0.001, 0.003, 0.01, 0.03]):
    needle = f"sleep 6{attempt}{TAG}"
    call = {"jsonrpc": "2.0", "id": f"bg{attempt}", "method": "tools/call", "params": bash(needle, run_in_background=True)}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": f"bg{attempt}"}}
    if delay == 0:
        s.send_raw(json.dumps(call).encode() + b"\n" + json.dumps(cancel).encode() + b"\n")
    else:
        s.send(call)
        time.sleep(delay)
        s.send(cancel)
    time.sleep(0.5)
    s.send({"jsonrpc": "2.0", "id": f"after{attempt}", "method": "ping"})
    answered = None
    while True:
        m = s.read()
        if m is None or m.get("id") == f"after{attempt}":
            break
        if m.get("id") == f"bg{attempt}":
            answered = m
    if answered is None:
        check(f"cancelled start {attempt} (after {delay}s), unanswered: nothing runs",
              wait_until(lambda: not alive(needle), 3), needle)
    else:  # the start answered before the cancellation arrived: the client knows its id
        check(f"cancelled start {attempt} answered first: its id is known", "started background task" in
              answered["result"]["content"][0]["text"], answered)
check("exit 0", s.close() == 0)

section("ids echoed exactly as sent")
s = Server()
s.initialize()
for raw in [b"-9223372036854775809", b"18446744073709551616", b"123456789012345678901234567890", b"-0",
            b"9223372036854775807", b"-9223372036854775808", b"18446744073709551615"]:
    s.send_raw(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}\n')
    line = s.read_raw()
    check(f"integer id {raw.decode()} answered with the same bytes",
          line is not None and line.startswith(b'{"id":' + raw + b",") and json.loads(line).get("result") == {}, line)
for raw in [b"1.50", b"1E2", b"-0.0", b"2.5e-3"]:
    s.send_raw(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"ping"}\n')
    line = s.read_raw()
    check(f"non-integer id {raw.decode()} refused, echoed with the same bytes",
          line is not None and line.startswith(b'{"id":' + raw + b",") and json.loads(line)["error"]["code"] == -32600,
          line)
s.send_raw(b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}\n')
r = s.read()
check("an id beyond a double is a parse error", r["error"]["code"] == -32700 and r["id"] is None, r)
big = b"-9223372036854775809"
needle = f"sleep 8{TAG}"
s.send_raw(b'{"jsonrpc":"2.0","id":' + big + b',"method":"tools/call","params":' + json.dumps(bash(needle)).encode()
           + b"}\n")
check("a call with a big id runs", wait_until(lambda: alive(needle), 10))
s.send_raw(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":' + big + b"}}\n")
check("and a cancellation naming that id kills it", wait_until(lambda: not alive(needle), 10))
r = s.request("next", "ping")
check("with no response", r["id"] == "next", r)
check("exit 0", s.close() == 0)

section("tasks over raw JSON-RPC")
s = Server()
s.initialize("2025-06-18")
r = s.request(1, "tools/call", {**bash("echo plain"), "task": {}})
check("before 2025-11-25 a task field is ignored: a plain result", "content" in r.get("result", {}), r)
r = s.request(2, "tasks/list")
check("before 2025-11-25 tasks/list is not a method", r.get("error", {}).get("code") == -32601, r)
check("exit 0", s.close() == 0)
s = Server()
init = s.initialize()
check("2025-11-25 declares the tasks capability",
      init["result"]["capabilities"].get("tasks", {}).get("requests", {}).get("tools", {}).get("call") == {}, init)
r = s.request(1, "tools/call", {**bash("echo x"), "task": "soon"})
check("a task that is not an object: -32602", r["error"]["code"] == -32602, r)
r = s.request(2, "tools/call", {"name": "bash_output", "arguments": {"task_id": "bash-1"}, "task": {}})
check("bash_output as a task: -32602 naming why", r["error"]["code"] == -32602 and "forbidden" in r["error"]["message"], r)
r = s.request(3, "tools/call", {**bash("echo x"), "task": {"ttl": -5}})
check("a negative ttl: -32602", r["error"]["code"] == -32602, r)
r = s.request(4, "tasks/get", {"taskId": "task-999"})
check("an unknown task: -32602", r["error"]["code"] == -32602 and "unknown task" in r["error"]["message"], r)
r = s.request(5, "tasks/get", {})
check("tasks/get without taskId: -32602", r["error"]["code"] == -32602, r)
r = s.request(6, "tasks/list", {"cursor": "not-a-cursor"})
check("a cursor tasks/list never gave: -32602", r["error"]["code"] == -32602, r)
needle = f"sleep 8{TAG}"
created = s.request(7, "tools/call", {**bash(f"echo started; {needle}"), "task": {"ttl": 3600000000}})
task = created["result"]["task"]
check("CreateTaskResult at once, working", task["status"] == "working" and task["taskId"], created)
check("the ttl is capped by the server", task["ttl"] <= 3600000, task)
# tasks/result waits: answered only when the task ends, here by tasks/cancel.
s.send({"jsonrpc": "2.0", "id": 8, "method": "tasks/result", "params": {"taskId": task["taskId"]}})
check("the command runs", wait_until(lambda: alive(needle), 10))
cancel = s.request(9, "tasks/cancel", {"taskId": task["taskId"]})
check("tasks/cancel answers the task, cancelled", cancel.get("result", {}).get("status") == "cancelled", cancel)
waiting = s.response(8)
check("the waiting tasks/result is answered with an error", waiting.get("error", {}).get("code") == -32602, waiting)
check("the command is killed", wait_until(lambda: not alive(needle), 10))
statuses = [n["params"]["status"] for n in s.notes
            if n.get("method") == "notifications/tasks/status" and n["params"]["taskId"] == task["taskId"]]
check("notifications/tasks/status: cancelled", statuses == ["cancelled"], statuses)
done = s.request(10, "tools/call", {**bash("exit 3"), "task": {}})["result"]["task"]
check("a finished task's result arrives", wait_until(
    lambda: s.request(11, "tasks/get", {"taskId": done["taskId"]})["result"]["status"] == "completed", 10))
r = s.request(12, "tasks/result", {"taskId": done["taskId"]})
check("tasks/result: the CallToolResult, isError false for a non-zero exit",
      r["result"]["isError"] is False and r["result"]["structuredContent"]["exit_code"] == 3, r)
r = s.request(13, "tasks/cancel", {"taskId": done["taskId"]})
check("cancelling an ended task: -32602", r["error"]["code"] == -32602 and "already ended" in r["error"]["message"], r)
listed = s.request(14, "tasks/list")["result"]["tasks"]
check("tasks/list: both tasks, oldest first", [t["taskId"] for t in listed] == [task["taskId"], done["taskId"]], listed)
check("exit 0", s.close() == 0)

section("end of input")
s = Server()
s.initialize()
bg = f"sleep 6{TAG}"
fg = f"sleep 7{TAG}"
s.request("bg", "tools/call", bash(bg, run_in_background=True))
s.send({"jsonrpc": "2.0", "id": "fg", "method": "tools/call", "params": bash(fg)})
check("both sleeps run", wait_until(lambda: alive(bg) and alive(fg), 10))
status = s.close()
check("exit 0 at end of input", status == 0, status)
check("nothing left running", not alive(bg) and not alive(fg))
s = Server()
s.initialize()
s.request("bg", "tools/call", bash(bg, run_in_background=True))
check("SIGTERM: the sleep runs", wait_until(lambda: alive(bg), 10))
s.proc.terminate()
check("SIGTERM: exit 143", s.proc.wait(20) == 143)
check("SIGTERM: nothing left running", not alive(bg))

shutil.rmtree(WORKDIR, ignore_errors=True)
checks.finish()
