#!/usr/bin/env python3
"""A minimal harness for `bashexec serve` in Python's standard library: one
JSON request per line in, one response line out (docs/tool-protocol.md).
Usage: serve_harness.py [BASHEXEC] [COMMAND]"""
import json
import subprocess
import sys

bashexec = sys.argv[1] if len(sys.argv) > 1 else "bashexec"
command = sys.argv[2] if len(sys.argv) > 2 else "echo hello from bashexec"

server = subprocess.Popen([bashexec, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def call(request):
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    while True:
        response = json.loads(server.stdout.readline())
        if response.get("id") == request["id"]:  # skip unprompted notice lines
            return response


tools = call({"id": 1, "op": "tools"})
print("tools:", ", ".join(tool["name"] for tool in tools["tools"]))
result = call({"id": 2, "session": "s1", "tool": "bash", "args": {"command": command, "description": "example"}})
print(result["text"])
print("is_error:", result["is_error"])
server.stdin.close()  # end of input: the server kills what is left and exits 0
sys.exit(server.wait())
