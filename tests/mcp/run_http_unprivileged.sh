#!/usr/bin/env bash
# Runs mcp_http_test.py as an ordinary user (nobody): the server then sees
# its commands' descriptors only as their owner, with no privilege, and must
# still refuse a command's connection and serve this client.
# Usage: run_http_unprivileged.sh BASHEXEC. Exit 77 (SKIP) when not root.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: needs root to become an ordinary user (this is uid $(id -u))"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 777 "$work"
setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work" \
  python3 "$(dirname "$0")/mcp_http_test.py" "$1" "$work"
