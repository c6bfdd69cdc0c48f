#!/bin/sh
# Runs a test binary as an ordinary user (nobody), so behaviour that differs
# between root and everyone else is proven both ways. Exit 77 (CTest's
# "skipped") with the reason when that cannot be done here.
set -u
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the suite already runs unprivileged (uid $(id -u)); the root half needs root"
  exit 77
fi
if ! command -v setpriv >/dev/null 2>&1; then
  echo "skipped: setpriv (util-linux) is not installed"
  exit 77
fi
as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all"
if ! $as_nobody test -x "$1"; then
  echo "skipped: user nobody cannot execute $1 (a parent directory is not searchable for others)"
  exit 77
fi
cd /var/tmp || exit 1
# Not counted by the Catch2 run log: these cases ran once as root already.
exec env -u XDG_RUNTIME_DIR -u BASHEXEC_CATCH_RUN_LOG $as_nobody "$@"
