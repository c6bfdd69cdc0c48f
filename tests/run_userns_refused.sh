#!/bin/sh
# Runs a test binary where the kernel refuses new user namespaces and the
# process holds no capability: inside a user namespace of root's own whose
# user.max_user_namespaces is 0 (a per-namespace limit: the host's is
# untouched), with every capability dropped. So Landlock's fallback — no
# user namespace for the child — is proven without changing the machine.
# Exit 77 (CTest's "skipped") with the reason when that cannot be done here.
set -u
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: needs root to set up the refusing namespace"
  exit 77
fi
for tool in unshare setpriv; do
  if ! command -v $tool >/dev/null 2>&1; then
    echo "skipped: $tool (util-linux) is not installed"
    exit 77
  fi
done
if ! unshare --user --map-root-user true 2>/dev/null; then
  echo "skipped: no user namespace can be created here at all"
  exit 77
fi
cd /var/tmp || exit 1
export BASHEXEC_REFUSING_LIMIT=1
exec env -u XDG_RUNTIME_DIR -u BASHEXEC_CATCH_RUN_LOG unshare --user --map-root-user sh -c \
  'echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --inh-caps=-all --bounding-set=-all "$@"' sh "$@"
