#!/usr/bin/env python3
"""Attacks `bashexec mcp --http` with what a hostile or broken HTTP client
sends — Python's standard library only (http.client, raw sockets): no token
or a wrong one, a foreign Origin, a Host of another name, a 100 MiB body,
10,000 headers, one byte a second, 1,000 sessions, a GET stream never read,
a client SIGKILLed mid-call, an idle session, SIGTERM of the server, the
health probes a kubelet sends — and
checks that each is answered with the documented status while other
sessions keep being served, and that no command outlives what should end it.

Usage: mcp_http_test.py BASHEXEC WORKDIR. Prints each check; exits 1 when
one failed or did not run. Every address is 127.0.0.1."""
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

from checklist import Checklist

BASHEXEC, WORK = sys.argv[1], sys.argv[2]
WORKDIR = os.path.join(WORK, f"mcp-http-{os.getpid()}")
shutil.rmtree(WORKDIR, ignore_errors=True)
os.makedirs(WORKDIR)
TAG = f"{os.getpid()}{int(time.time()) % 100000}"
VERSION = "2025-11-25"

EXPECTED = [
    "a non-loopback address needs a token, and the token file must be private",
    "the bearer token",
    "Host and Origin allowlists",
    "sessions: ids, versions, methods and paths",
    "a 100 MiB body",
    "10,000 headers",
    "a client sending one byte a second",
    "1,000 sessions",
    "health probes: /livez and /readyz",
    "a GET stream never read",
    "a session that reads nothing: its backlog is bounded",
    "a client SIGKILLed mid-call",
    "an idle session expires and its commands die",
    "a command cannot reach the server that runs it",
    "SIGTERM: exit 143, nothing left running",
]


checks = Checklist(EXPECTED)
check = checks.check
section = checks.section


def pids(needle):
    out = subprocess.run(["pgrep", "-f", needle], capture_output=True, text=True).stdout
    return [p for p in out.split() if p and int(p) != os.getpid()]


def wait_until(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class Server:
    """`bashexec mcp --http 127.0.0.1:0 ...`, its port read from stderr."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([BASHEXEC, "mcp", "--http", "127.0.0.1:0", "--workdir", WORKDIR, *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        line = self.proc.stderr.readline().decode()
        found = re.search(r"MCP over HTTP at http://127\.0\.0\.1:(\d+)(/\S*)", line)
        if not found:
            raise RuntimeError(f"the server did not start: {line!r}")
        self.port, self.path = int(found.group(1)), found.group(2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        finally:
            self.proc.stderr.close()

    def request(self, method, body=None, headers=None, session=None, version=VERSION, path=None, timeout=30):
        """One request on its own connection: (status, headers, body text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = {"Accept": "application/json, text/event-stream"}
        if body is not None:
            sent["Content-Type"] = "application/json"
        if session:
            sent["Mcp-Session-Id"] = session
        if version:
            sent["MCP-Protocol-Version"] = version
        sent.update(headers or {})
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        conn.request(method, path or self.path, body=data, headers=sent)
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
        conn.close()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, text

    def call_from_another_process(self, session, command, request_id=1):
        """A bash call POSTed by a client process of its own (to be killed,
        or to hold a worker slot while this one goes on); the Popen."""
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": "bash", "arguments": {"command": command, "description": "x"}}}
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}
        return subprocess.Popen([sys.executable, "-c", "\n".join([
            "import http.client, json, sys",
            f"c = http.client.HTTPConnection('127.0.0.1', {self.port})",
            f"c.request('POST', {self.path!r}, body={json.dumps(request)!r}, headers={headers!r})",
            "c.getresponse().read()"])])

    def initialize(self, headers=None):
        status, got, text = self.request("POST", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "http-test", "version": "1"}}},
            headers=headers, version=None)
        session = got.get("mcp-session-id")
        if status == 200 and session:
            self.request("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers,
                         session=session)
        return status, session, text

    def call(self, session, command, request_id=1, headers=None, **extra):
        """A bash call: the JSON-RPC messages of its SSE answer."""
        status, _, text = self.request("POST", {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": command, "description": "http test", **extra}}},
            headers=headers, session=session)
        return status, sse_messages(text)


def sse_messages(text):
    return [json.loads(line[len("data: "):]) for line in text.split("\n")
            if line.startswith("data: ") and line[len("data: "):].strip()]


def raw(port, data, read=True, timeout=10):
    """Sends bytes on a fresh connection; the reply's first line."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        if not read:
            return ""
        reply = b""
        try:
            while b"\r\n" not in reply:
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        except OSError:
            pass
        return reply.split(b"\r\n", 1)[0].decode(errors="replace")


def result_text(messages):
    for m in messages:
        if "result" in m and "content" in m["result"]:
            return "".join(c.get("text", "") for c in m["result"]["content"])
    return ""


@section("a non-loopback address needs a token, and the token file must be private")
def _():
    refused = subprocess.run([BASHEXEC, "mcp", "--http", "0.0.0.0:0"], capture_output=True, text=True, timeout=30)
    check("0.0.0.0 without --token-file: a usage error", refused.returncode == 2 and "--token-file" in refused.stderr,
          f"{refused.returncode}: {refused.stderr}")
    public = os.path.join(WORKDIR, "public-token")
    with open(public, "w") as f:
        f.write("0123456789abcdef0123\n")
    os.chmod(public, 0o644)
    refused = subprocess.run([BASHEXEC, "mcp", "--http", "127.0.0.1:0", "--token-file", public],
                             capture_output=True, text=True, timeout=30)
    check("a token file others can read: a usage error", refused.returncode == 2 and "chmod 600" in refused.stderr,
          f"{refused.returncode}: {refused.stderr}")
    refused = subprocess.run([BASHEXEC, "mcp", "--token-file", public], capture_output=True, text=True, timeout=30)
    check("--token-file without --http: a usage error", refused.returncode == 2, refused.stderr)


@section("the bearer token")
def _():
    token_file = os.path.join(WORKDIR, "token")
    token = "s3cret-token-" + TAG
    with open(token_file, "w") as f:
        f.write(token + "\n")
    os.chmod(token_file, 0o600)
    with Server("--token-file", token_file) as server:
        status, got, text = server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        check("no token: 401 with WWW-Authenticate: Bearer", status == 401 and got.get("www-authenticate") == "Bearer",
              f"{status} {got}")
        check("no token: the body is a JSON-RPC error", json.loads(text).get("error", {}).get("code") == -32600, text)
        status, _, _ = server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                      headers={"Authorization": "Bearer " + token[:-1] + "x"})
        check("a wrong token of the same length: 401", status == 401, str(status))
        status, _, _ = server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                      headers={"Authorization": "Basic " + token})
        check("another scheme: 401", status == 401, str(status))
        auth = {"Authorization": "Bearer " + token}
        status, session, _ = server.initialize(headers=auth)
        check("the right token: a session", status == 200 and session, str(status))
        status, messages = server.call(session, "echo authorized", headers=auth)
        check("the right token: the call runs", status == 200 and "authorized" in result_text(messages), str(messages))


@section("Host and Origin allowlists")
def _():
    with Server("--allow-host", "bashexec.internal:8443", "--allow-origin", "https://harness.example") as server:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        status, _, _ = server.request("POST", ping, headers={"Host": f"evil.example:{server.port}"})
        check("a Host of another name (DNS rebinding): 403", status == 403, str(status))
        status, _, _ = server.request("POST", ping, headers={"Origin": "http://evil.example"})
        check("a foreign Origin: 403", status == 403, str(status))
        status, session, _ = server.initialize(headers={"Origin": f"http://127.0.0.1:{server.port}"})
        check("the server's own origin: admitted", status == 200 and session, str(status))
        status, session, _ = server.initialize(headers={"Origin": "https://harness.example"})
        check("an --allow-origin origin: admitted", status == 200 and session, str(status))
        status, session, _ = server.initialize(headers={"Host": "bashexec.internal:8443"})
        check("an --allow-host name: admitted", status == 200 and session, str(status))
        status, session, _ = server.initialize(headers={"Host": f"localhost:{server.port}"})
        check("localhost on a loopback bind: admitted", status == 200 and session, str(status))


@section("sessions: ids, versions, methods and paths")
def _():
    with Server() as server:
        ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
        status, _, text = server.request("POST", ping)
        check("no MCP-Session-Id: 400", status == 400 and "MCP-Session-Id" in text, f"{status} {text}")
        status, _, _ = server.request("POST", ping, session="0" * 32)
        check("an unknown session: 404", status == 404, str(status))
        status, _, _ = server.request("POST", ping, session="../../etc/passwd")
        check("a session id of another shape: 404", status == 404, str(status))
        status, session, text = server.initialize()
        check("initialize: 200 and a 32-hex session id", status == 200 and re.fullmatch(r"[0-9a-f]{32}", session or ""),
              f"{status} {session}")
        status, _, text = server.request("POST", ping, session=session)
        check("ping in the session: its response on the SSE stream",
              status == 200 and sse_messages(text) == [{"jsonrpc": "2.0", "id": 7, "result": {}}], text)
        check("the stream opens with a priming event", re.match(r"id: \d+\.0\nretry: \d+\ndata:\n\n", text), text[:80])
        status, _, _ = server.request("POST", ping, session=session, version="1999-01-01")
        check("an MCP-Protocol-Version it does not speak: 400", status == 400, str(status))
        status, _, text = server.request("POST", {"jsonrpc": "2.0", "method": "notifications/nothing"}, session=session)
        check("a notification: 202 and no body", status == 202 and text == "", f"{status} {text!r}")
        status, _, text = server.request("POST", b"{not json", session=session)
        check("malformed JSON: 400 with a parse error", status == 400 and json.loads(text)["error"]["code"] == -32700,
              text)
        status, got, _ = server.request("PUT", ping, session=session)
        check("PUT: 405 with Allow", status == 405 and "POST" in got.get("allow", ""), f"{status} {got}")
        status, _, _ = server.request("POST", ping, session=session, path="/elsewhere")
        check("another path: 404", status == 404, str(status))
        status, _, _ = server.request("POST", ping, session=session, headers={"Accept": "application/json"})
        check("a POST that does not accept SSE: 406", status == 406, str(status))
        status, _, _ = server.request("POST", ping, session=session, headers={"Content-Type": "text/plain"})
        check("a POST body that is not JSON by type: 415", status == 415, str(status))
        status, _, _ = server.request("POST", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
            session=session)
        check("initialize inside a session: 400", status == 400, str(status))
        status, _, _ = server.request("DELETE", session=session)
        check("DELETE: 200", status == 200, str(status))
        status, _, _ = server.request("POST", ping, session=session)
        check("after DELETE the session is gone: 404", status == 404, str(status))


@section("a 100 MiB body")
def _():
    with Server() as server:
        _, session, _ = server.initialize()
        head = (f"POST {server.path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n"
                f"Content-Length: {100 << 20}\r\n\r\n").encode()
        line = raw(server.port, head + b"[" * 65536)
        check("a declared 100 MiB body: 413 before it is read", " 413 " in line, line)
        chunked = (f"POST {server.path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                   f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n"
                   f"Transfer-Encoding: chunked\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.sendall(chunked)
            block = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
            try:
                for _ in range(100):
                    s.sendall(block)
            except OSError:
                pass
            reply = b""
            try:
                while b"\r\n" not in reply:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
            except OSError:
                pass
        line = reply.split(b"\r\n", 1)[0].decode(errors="replace")
        check("a chunked body past the limit: 413 or closed, never taken", " 413 " in line or line == "", line)
        status, messages = server.call(session, "echo still-serving")
        check("the session is still served", status == 200 and "still-serving" in result_text(messages), str(messages))


@section("10,000 headers")
def _():
    with Server() as server:
        head = f"POST {server.path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode()
        head += b"".join(b"X-Filler-%d: x\r\n" % i for i in range(10000)) + b"\r\n"
        line = raw(server.port, head)
        check("10,000 headers: 431", " 431 " in line, line)
        status, session, _ = server.initialize()
        check("others are still served", status == 200 and session, str(status))


@section("a client sending one byte a second")
def _():
    with Server("--request-timeout", "2s") as server:
        slow = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        request = f"POST {server.path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode()
        began = time.time()
        slow.sendall(request[:1])
        _, session, _ = server.initialize()
        status, messages = server.call(session, "echo meanwhile")
        check("while it trickles, another client is served", status == 200 and "meanwhile" in result_text(messages),
              str(messages))
        closed = False
        for byte in request[1:]:
            time.sleep(1)
            try:
                slow.sendall(bytes([byte]))
                slow.setblocking(False)
                try:
                    if slow.recv(1) == b"":
                        closed = True
                        break
                except BlockingIOError:
                    pass
                finally:
                    slow.setblocking(True)
            except OSError:
                closed = True
                break
            if time.time() - began > 8:
                break
        slow.close()
        check("the trickling connection is closed after --request-timeout", closed, f"{time.time() - began:.1f} s")


@section("1,000 sessions")
def _():
    with Server("--max-sessions", "40") as server:
        opened, refused, other = [], 0, []
        for _ in range(1000):
            status, session, text = server.initialize()
            if status == 200:
                opened.append(session)
            elif status == 503 and json.loads(text).get("error", {}).get("code") is not None:
                refused += 1
            else:
                other.append(status)
        check("the first 40 open", len(opened) == 40, str(len(opened)))
        check("the other 960 are refused 503 with a JSON-RPC error", refused == 960 and not other, f"{refused} {other}")
        status, messages = server.call(opened[0], "echo at-capacity")
        check("at capacity the open sessions are served", status == 200 and "at-capacity" in result_text(messages))
        server.request("DELETE", session=opened.pop())
        ok = wait_until(lambda: server.initialize()[0] == 200, 10)
        check("a DELETE makes room for a new one", ok)


@section("health probes: /livez and /readyz")
def _():
    token_file = os.path.join(WORKDIR, "probe-token")
    with open(token_file, "w") as f:
        f.write("probe-token-" + TAG + "\n")
    os.chmod(token_file, 0o600)
    with Server("--token-file", token_file, "--max-sessions", "1") as server:
        # As a kubelet asks: no token, the pod's address as Host, no MCP headers.
        kubelet = {"Host": f"10.1.2.3:{server.port}"}
        status, got, text = server.request("GET", path="/livez", headers=kubelet, version=None)
        check("/livez without a token, from another Host: 200 live", status == 200 and json.loads(text) ==
              {"status": "live"}, f"{status} {text}")
        check("a probe's answer is not cached", got.get("cache-control") == "no-store", str(got))
        status, _, text = server.request("GET", path="/readyz", headers=kubelet, version=None)
        check("/readyz with room for a session: 200 ready", status == 200 and json.loads(text) == {"status": "ready"},
              f"{status} {text}")
        status, got, _ = server.request("POST", {"x": 1}, path="/readyz", headers=kubelet, version=None)
        check("a probe is a GET: POST is 405 with Allow", status == 405 and "GET" in got.get("allow", ""),
              f"{status} {got}")
        status, _, _ = server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=kubelet)
        check("the MCP endpoint still wants its token and Host", status in (401, 403), str(status))
        auth = {"Authorization": "Bearer probe-token-" + TAG}
        status, session, _ = server.initialize(headers=auth)
        check("a session opens", status == 200 and session, str(status))
        status, _, text = server.request("GET", path="/readyz", headers=kubelet, version=None)
        check("at --max-sessions: /readyz 503 full (a router sends the next claim elsewhere)",
              status == 503 and json.loads(text) == {"status": "full"}, f"{status} {text}")
        status, _, _ = server.request("GET", path="/livez", headers=kubelet, version=None)
        check("and /livez stays 200", status == 200, str(status))
        server.request("DELETE", headers=auth, session=session)
        ready = wait_until(lambda: server.request("GET", path="/readyz", version=None)[0] == 200, 10)
        check("the session ended: ready again", ready)


@section("a GET stream never read")
def _():
    with Server("--write-timeout", "2s") as server:
        _, stalled, _ = server.initialize()
        never_read = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        never_read.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        never_read.sendall((f"GET {server.path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                            f"Accept: text/event-stream\r\nMcp-Session-Id: {stalled}\r\n"
                            f"MCP-Protocol-Version: {VERSION}\r\n\r\n").encode())
        # Its session's background tasks settle and are announced on that stream.
        for i in range(20):
            server.call(stalled, "head -c 3000 /dev/zero | tr '\\0' x", request_id=100 + i, run_in_background=True)
        _, other, _ = server.initialize()
        served = all("served-%d" % i in result_text(server.call(other, f"echo served-{i}", request_id=i)[1])
                     for i in range(20))
        check("other sessions are served while it is not read", served)
        status, messages = server.call(stalled, "echo own-session")
        check("its own session still answers on new streams", status == 200 and "own-session" in result_text(messages))
        never_read.close()


@section("a session that reads nothing: its backlog is bounded")
def _():
    # One worker slot, taken by a sleep: the session's server reads nothing
    # more, so what a client POSTs waits in the transport, up to 32 MiB.
    with Server("--max-in-flight", "1", "--mode", "workspace-write") as server:
        _, session, _ = server.initialize()
        # The first call takes the slot (seen by its marker); the second,
        # POSTed before any padding, waits for it, and so does the session's
        # reading. Threads, not client processes: an interpreter's start on
        # a loaded machine took longer than any fixed pause, and a padding
        # POSTed before the second call is read at once.
        started = os.path.join(WORKDIR, f"busy-{TAG}")
        answers = {}

        def busy(n, command):
            answers[n] = server.call(session, command, request_id=n)

        first = threading.Thread(target=busy, args=(1, f"touch {started}; sleep 3"))
        first.start()
        holding = wait_until(lambda: os.path.exists(started), 30)
        second = threading.Thread(target=busy, args=(2, "sleep 1"))
        second.start()
        time.sleep(0.5)
        pad = json.dumps({"jsonrpc": "2.0", "method": "notifications/padding", "params": {"pad": "x" * (15 << 20)}})
        statuses = [server.request("POST", pad.encode(), session=session)[0] for _ in range(4)]
        check("notifications queue while it is busy, then 429",
              holding and statuses[:2] == [202, 202] and 429 in statuses, f"{statuses}, slot taken: {holding}")
        for thread in (first, second):
            thread.join(timeout=60)
        check("the calls it was busy with answered", all(
            answers.get(n, (0, []))[0] == 200 and result_text(answers[n][1]) != "" for n in (1, 2)),
            str({n: (a[0], str(a[1])[:200]) for n, a in answers.items()}))
        # The session reads its 45 MiB backlog once the calls are done; until
        # it has, a POST is 429 with Retry-After, which a client obeys.
        refused = 0
        deadline = time.time() + 60
        while True:
            status, got, text = server.request("POST", {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
                "name": "bash", "arguments": {"command": "echo drained", "description": "http test"}}},
                session=session)
            if status != 429 or time.time() > deadline:
                break
            refused += 1
            time.sleep(float(got.get("retry-after", "1")))
        check("once its calls end the session reads again", status == 200 and "drained" in result_text(
            sse_messages(text)), f"{status} {text[:600]!r} after {refused} 429")


@section("a client SIGKILLed mid-call")
def _():
    with Server("--mode", "workspace-write") as server:
        _, session, _ = server.initialize()
        marker = os.path.join(WORKDIR, f"finished-{TAG}")
        started = os.path.join(WORKDIR, f"started-{TAG}")
        client = server.call_from_another_process(session, f"touch {started}; sleep 1.5; echo done > {marker}")
        # Killed once its command runs (a client process may take longer than
        # any fixed pause to start on a loaded machine) and before it ends.
        running = wait_until(lambda: os.path.exists(started), 30)
        client.kill()
        client.wait()
        check("the client was killed mid-call", running and not os.path.exists(marker))
        check("the server lives on after the client died", server.proc.poll() is None)
        check("the dropped connection did not stop the command: it finished", wait_until(
            lambda: os.path.exists(marker), 15))
        status, messages = server.call(session, "echo after-the-kill", request_id=2)
        check("the session still answers", status == 200 and "after-the-kill" in result_text(messages), str(messages))


@section("an idle session expires and its commands die")
def _():
    with Server("--session-idle-timeout", "1s") as server:
        _, session, _ = server.initialize()
        needle = f"sleep 31{TAG}"
        status, messages = server.call(session, needle, run_in_background=True)
        check("the background sleep runs", wait_until(lambda: pids(needle), 10), str(messages))
        check("after the idle timeout it is killed", wait_until(lambda: not pids(needle), 15), " ".join(pids(needle)))
        status, _, _ = server.request("POST", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, session=session)
        check("and the session is gone: 404", status == 404, str(status))


@section("a command cannot reach the server that runs it")
def _():
    # Under network full a confined command shares the host's loopback: were
    # it served, it could open a session of its own and approve its own
    # escalation. Each backend, and a background command that left its
    # process group, must be refused before a byte is read.
    probe = ("exec 3<>/dev/tcp/127.0.0.1/{port} && "
             "printf 'POST {path} HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\nContent-Type: application/json\\r\\n"
             "Accept: application/json, text/event-stream\\r\\nContent-Length: 40\\r\\n\\r\\n"
             "{{\\\"jsonrpc\\\":\\\"2.0\\\",\\\"id\\\":1,\\\"method\\\":\\\"ping\\\"}}' >&3 && "
             "head -c 400 <&3")
    for args in (["--backend", "bwrap"], ["--backend", "landlock"], ["--unconfined"]):
        with Server(*args) as server:
            _, session, _ = server.initialize()
            status, messages = server.call(session, probe.format(port=server.port, path=server.path))
            text = result_text(messages)
            check(f"{' '.join(args)}: the command's request is refused 403", "HTTP/1.1 403" in text, text[:300])
            check(f"{' '.join(args)}: and told why", "a command that bashexec runs" in text, text[:300])
            # In a session of its own (out of its process group): still one of ours.
            status, messages = server.call(session, "setsid -w bash -c " + shlex.quote(
                probe.format(port=server.port, path=server.path)), request_id=2)
            text = result_text(messages)
            check(f"{' '.join(args)}: from a new session (setsid) too", "HTTP/1.1 403" in text, text[:300])


@section("SIGTERM: exit 143, nothing left running")
def _():
    server = Server()
    _, session, _ = server.initialize()
    needle = f"sleep 32{TAG}"
    server.call(session, needle, run_in_background=True)
    check("the background sleep runs", wait_until(lambda: pids(needle), 10))
    status = server.stop()
    check("SIGTERM: exit 143", status == 143, str(status))
    check("nothing left running", wait_until(lambda: not pids(needle), 5), " ".join(pids(needle)))


shutil.rmtree(WORKDIR, ignore_errors=True)
checks.finish()
