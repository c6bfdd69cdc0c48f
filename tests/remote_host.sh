#!/bin/sh
# A "remote host" for the network tests, built and torn down as root:
#   remote_host.sh setup NAME PREFIX      e.g. setup bxfx1a2b3c 10.204.17
#   remote_host.sh teardown NAME
# NAME (at most 12 characters) names the host (its network namespace is held
# by a process, recorded in pid.holder, not mounted); NAMEh and NAMEr are
# the two ends of a veth pair joining it to the host's namespace, PREFIX.1
# on the host's end and PREFIX.2 (the remote host) in the namespace, a /24.
# In it run real HTTP servers on PREFIX.2 ports 80 and 443 (443 plain HTTP,
# for CONNECT tunnels) serving www/hello.txt. Each server appends a line per
# request to /var/tmp/bashexec-remote-NAME/requests.log:
#   <port> <request line> | Host: <Host header>
# The directory and the log are world-readable, so a test running as nobody
# can read what arrived (/tmp may be private to the test). Nothing here
# reaches an address outside the namespaces it makes.
# Used by tests/remote_host_support.hpp (a host per test case, as root) and by
# the CTest fixture in tests/extra_tests.cmake (one host for the unprivileged
# rerun of test_network_allowlist). Exit 77 (CTest's "skipped") with the
# reason when it cannot be done here, and 3 when PREFIX.0/24 is taken (by
# another remote host of a test running beside this one): the caller may try
# another PREFIX. Checking and taking the /24 happen under one lock, so two
# setups at once never both get it.
set -u
umask 022
action=${1:-}
name=${2:-}
case "$name" in
  '' | *[!a-z0-9]* ) echo "remote_host.sh: NAME must be lower-case letters and digits, got '$name'" >&2; exit 2 ;;
esac
if [ "${#name}" -gt 12 ]; then
  echo "remote_host.sh: NAME must be at most 12 characters (veth names), got '$name'" >&2
  exit 2
fi
dir=/var/tmp/bashexec-remote-$name

teardown() {
  for f in "$dir"/pid.*; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  ip link del "${name}h" 2>/dev/null
  ip netns del "$name" 2>/dev/null  # a host an older version of this script made
  # Only a directory of root's own, never through a link another user made.
  if [ -d "$dir" ] && [ ! -L "$dir" ] && [ "$(stat -c %u "$dir")" = 0 ]; then rm -rf "$dir"; fi
  return 0
}

case "$action" in
  teardown)
    [ "$(id -u)" -eq 0 ] || { echo "skipped: tearing down a remote host needs root"; exit 77; }
    teardown
    exit 0
    ;;
  setup) ;;
  *) echo "usage: remote_host.sh setup NAME PREFIX | teardown NAME" >&2; exit 2 ;;
esac

prefix=${3:-}
case "$prefix" in
  10.*.*) ;;
  *) echo "remote_host.sh: PREFIX must be 10.X.Y, got '$prefix'" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the remote host needs root (a network namespace and a veth pair)"
  exit 77
fi
for program in /usr/sbin/ip /usr/bin/python3 /usr/bin/setsid /usr/bin/flock /usr/bin/unshare /usr/bin/nsenter; do
  [ -x "$program" ] || { echo "skipped: $program is not installed"; exit 77; }
done

teardown  # a leftover of an interrupted run under the same name
if [ -e "$dir" ] || [ -L "$dir" ]; then
  echo "remote_host.sh: $dir exists and is not root's directory: refusing to use it" >&2
  exit 1
fi
mkdir -m 755 "$dir" && mkdir -m 755 "$dir/www" || exit 1
echo "hello from the remote host" >"$dir/www/hello.txt"
: >"$dir/requests.log"
chmod 644 "$dir/requests.log" "$dir/www/hello.txt"
cat >"$dir/server.py" <<'EOF'
import sys, http.server, functools, os
address, port, root, log, pidfile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_request(self, code='-', size='-'):
        with open(log, 'a') as f:
            f.write(f'{port} {self.requestline} | Host: {self.headers.get("Host", "")}\n')
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((address, port), functools.partial(Handler, directory=root))
with open(pidfile, 'w') as f:
    f.write(str(os.getpid()))
server.serve_forever()
EOF

fail() {
  echo "remote_host.sh: $1 failed" >&2
  teardown
  exit 1
}
# The namespace is held by a process of its own (pid.holder), not by a mount
# under /run/netns as `ip netns add` would: such a mount is part of / for
# every bwrap sandbox being set up meanwhile, and one removed while bwrap
# copies the mount tree fails that sandbox ("remount /newroot/run/netns/NAME:
# No such file or directory").
setsid unshare --net sleep infinity </dev/null >/dev/null 2>&1 &
holder=$!
echo "$holder" >"$dir/pid.holder"
tries=0
until [ -e "/proc/$holder/ns/net" ] && [ "$(readlink "/proc/$holder/ns/net")" != "$(readlink /proc/self/ns/net)" ]; do
  tries=$((tries + 1))
  [ "$tries" -lt 100 ] || fail "unshare --net"
  sleep 0.02
done
in_remote() { nsenter -t "$holder" -n "$@"; }
ip link add "${name}h" type veth peer name "${name}r" || fail "ip link add"
ip link set "${name}r" netns "$holder" || fail "ip link set netns"
# Check and take the /24 under one lock (fd 9): a test beside this one may be
# setting up a host of its own.
exec 9>/run/bashexec-remote-host.lock || fail "opening /run/bashexec-remote-host.lock"
flock 9 || fail "flock"
if ip -4 route show | grep -q "^$prefix\.0/24 "; then
  echo "remote_host.sh: $prefix.0/24 is routed already (another remote host?)" >&2
  teardown
  exit 3
fi
ip addr add "$prefix.1/24" dev "${name}h" && ip link set "${name}h" up || fail "the host's end"
exec 9>&-
in_remote ip addr add "$prefix.2/24" dev "${name}r" && in_remote ip link set "${name}r" up &&
  in_remote ip link set lo up || fail "the remote end"
for port in 80 443; do
  # setsid and no inherited descriptor: the servers outlive this script, and
  # CTest does not wait for them.
  setsid nsenter -t "$holder" -n /usr/bin/python3 "$dir/server.py" "$prefix.2" "$port" "$dir/www" \
    "$dir/requests.log" "$dir/pid.$port" </dev/null >/dev/null 2>&1 &
done
for port in 80 443; do
  tries=0
  until python3 -c "import socket, sys; socket.create_connection(('$prefix.2', $port), 1)" 2>/dev/null; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || fail "the server on port $port"
    sleep 0.05
  done
done
exit 0
