#!/usr/bin/env bash
# Runs a Node script with the MCP SDK installed by `npm ci` from
# tests/mcp/package-lock.json into WORK/node_modules (in the build tree;
# reinstalled only when the lock file changes).
# Usage: run.sh WORK SCRIPT [ARGS...]   SCRIPT is copied into WORK so that its
# imports resolve against WORK/node_modules; ARGS go to the script.
# Exit 77 (CTest SKIP_RETURN_CODE) with the reason when node or npm is absent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$1 script=$2
shift 2
source "$here/npm_install.sh"
npm_install "$here" "$work"
cp "$script" "$work/"
exec node "$work/$(basename "$script")" "$@"
