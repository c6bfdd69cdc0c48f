#!/usr/bin/env bash
# Opt-in (not run by CI): builds the in-pod server image
# (deploy/kubernetes/Containerfile), runs it the way the Kubernetes manifests
# do (read-only root, uid/gid 10001, no capabilities, no_new_privs, the
# engine's default seccomp profile, emptyDir-like volumes, the token as a
# root:10001 0440 file) and drives it over HTTP with curl: the health
# probes, the bearer token, an MCP initialize and tools/call, the
# remote-executor endpoint (and bashexec::remote_executor driving the pod:
# the scale harness, small), a connection from outside the container's
# processes into its network namespace (what `kubectl port-forward` does),
# and SIGTERM. Closes with "N passed, N failed".
#
#   bash scripts/container-smoke.sh            # podman (installed if missing, as root)
#   ENGINE=docker bash scripts/container-smoke.sh
#   BASE_IMAGE=docker.io/library/debian:12-slim bash scripts/container-smoke.sh
#
# Without BASE_IMAGE, the Debian 12 base is made here from Debian's archive
# (debootstrap, then `import`), for machines that reach no container
# registry. Exit 0: every check passed; 1: a check failed; 2: no container
# could be run here, and the reason is printed.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${SMOKE_DIR:-/var/tmp/bashexec-container-smoke}"
engine="${ENGINE:-podman}"
image="${IMAGE:-localhost/bashexec:smoke}"
base="${BASE_IMAGE:-}"
local_base="localhost/bashexec-debian:12"
port="${PORT:-18080}"
name="bashexec-smoke-$$"

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "PASS $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { local what="$1"; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
not_in() { [[ "$2" != *"$1"* ]]; }
quiet() { "$@" >/dev/null 2>&1; }
cannot() {
  echo "container-smoke: cannot run a container here: $*" >&2
  echo "0 passed, 0 failed (not run)"
  exit 2
}

# ---------------------------------------------------------------- engine ---
engine_flags=()
run_flags=()
if [ "$engine" = podman ]; then
  if ! command -v podman >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || cannot "podman is not installed (apt-get install podman), and this is not root"
    echo "container-smoke: installing podman (Debian)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc uidmap >/dev/null ||
      cannot "apt-get install podman failed"
  fi
  # crun (podman's default runtime in Debian 12) refuses a hybrid cgroup
  # layout ("cgroups in hybrid mode not supported, drop all controllers from
  # cgroupv2"); runc runs there.
  if [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
    if ! command -v runc >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runc >/dev/null
    fi
    command -v runc >/dev/null 2>&1 && engine_flags=(--runtime runc)
  fi
  # Podman asks for RLIMIT_NOFILE and RLIMIT_NPROC above what a restricted
  # host grants ("setrlimit `RLIMIT_NOFILE`: Operation not permitted");
  # lowering a limit is always allowed.
  run_flags+=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
elif [ "$engine" = docker ]; then
  command -v docker >/dev/null 2>&1 || cannot "docker is not installed"
  info="$(docker info 2>&1)" || cannot "docker info: $(printf '%s\n' "$info" | tail -1)"
else
  cannot "ENGINE must be podman or docker"
fi
E() { "$engine" "${engine_flags[@]}" "$@"; }

mkdir -p "$work"
if [ -z "$base" ] && ! E image inspect "$local_base" >/dev/null 2>&1; then
  # ------------------------------------------------- a base from Debian ---
  [ "$(id -u)" -eq 0 ] || cannot "no base image and not root: set BASE_IMAGE to a Debian 12 image"
  command -v debootstrap >/dev/null 2>&1 ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
    cannot "apt-get install debootstrap failed"
  mirror="$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | awk 'NR == 1')"
  mirror="${mirror:-http://deb.debian.org/debian}"
  echo "container-smoke: debootstrap bookworm from $mirror (once; imported as $local_base)"
  rm -rf "$work/rootfs"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    cannot "debootstrap failed (see $work/debootstrap.log)"
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -c . | E import --change 'CMD ["/bin/bash"]' - "$local_base" >/dev/null ||
    cannot "$engine import failed"
  rm -rf "$work/rootfs"
fi
base="${base:-$local_base}"
if ! probe="$(E run --rm "${run_flags[@]}" --entrypoint /bin/true "$base" 2>&1)"; then
  cannot "$engine run failed: $(printf '%s\n' "$probe" | tail -1)"
fi

# ----------------------------------------------------------------- build ---
echo "container-smoke: building $image from $base"
if ! E build --network host "${run_flags[@]}" --build-arg BASE_IMAGE="$base" --build-arg JOBS="${JOBS:-2}" \
    -f "$root/deploy/kubernetes/Containerfile" -t "$image" "$root" >"$work/build.log" 2>&1; then
  tail -20 "$work/build.log"
  bad "the image builds (log: $work/build.log)"
  echo "$passed passed, $failed failed"
  exit 1
fi
ok "the image builds"

# ------------------------------------------------------------------- run ---
# What the pod has: emptyDirs are root-owned, mode 0777 with the fsGroup's
# setgid bit; the Secret's file is root:10001 0440.
run_dir="$(mktemp -d "$work/run.XXXXXX")"
for v in tmp workspace runtime secret; do mkdir -p "$run_dir/$v" && chown 0:10001 "$run_dir/$v" && chmod 2777 "$run_dir/$v"; done
chmod 0750 "$run_dir/secret"
token="$(head -c 32 /dev/urandom | base64 | tr -d '/+=\n' | cut -c1-40)"
printf '%s\n' "$token" >"$run_dir/secret/token"
chown 0:10001 "$run_dir/secret/token" && chmod 0440 "$run_dir/secret/token"

cleanup() {
  E rm -f "$name" >/dev/null 2>&1
  rm -rf "$run_dir"
}
trap cleanup EXIT

ro_tmpfs=()
[ "$engine" = podman ] && ro_tmpfs=(--read-only-tmpfs=false)
E run -d --name "$name" "${run_flags[@]}" \
  --read-only "${ro_tmpfs[@]}" --user 10001:10001 --group-add 10001 \
  --cap-drop ALL --security-opt no-new-privileges \
  -v "$run_dir/tmp:/tmp" -v "$run_dir/workspace:/workspace" -v "$run_dir/runtime:/run/bashexec" \
  -v "$run_dir/secret:/var/run/secrets/bashexec:ro" \
  -p "127.0.0.1:$port:8080" "$image" \
  --mode workspace-write --network none --allow-host "127.0.0.1:$port" >/dev/null ||
  cannot "$engine run of $image failed"

base_url="http://127.0.0.1:$port"
for _ in $(seq 1 50); do
  curl -fsS -o /dev/null "$base_url/livez" 2>/dev/null && break
  sleep 0.2
done
echo "container-smoke: server log:"; E logs "$name" 2>&1 | sed 's/^/  | /'

code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check "GET /livez answers 200 live" bash -c "curl -fsS '$base_url/livez' | grep -q '\"live\"'"
check "GET /readyz answers 200 ready" bash -c "curl -fsS '$base_url/readyz' | grep -q '\"ready\"'"
check "POST /mcp without the token is 401" test "$(code -H 'Content-Type: application/json' -d '{}' "$base_url/mcp")" = 401
check "a Host not allowed is 403" test "$(code -H "Authorization: Bearer $token" -H 'Host: evil.example:8080' \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d '{}' "$base_url/mcp")" = 403

mcp=(-H "Authorization: Bearer $token" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"container-smoke","version":"1"}}}'
headers="$run_dir/headers"
body="$(curl -sS -D "$headers" "${mcp[@]}" -d "$init" "$base_url/mcp")"
session="$(tr -d '\r' <"$headers" | sed -n 's/^[Mm][Cc][Pp]-[Ss]ession-[Ii]d: *//p')"
check "MCP initialize opens a session" test -n "$session"
check "MCP initialize names the server" grep -q '"serverInfo":{"name":"bashexec"' <<<"$body"
mcp+=(-H "MCP-Session-Id: $session" -H 'MCP-Protocol-Version: 2025-11-25')
check "notifications/initialized is 202" test "$(code "${mcp[@]}" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$base_url/mcp")" = 202

# One command: a write the workspace allows, one outside it that the
# sandbox must refuse (/run/bashexec is writable by uid 10001, so only the
# sandbox stops it), the server's own port, which --network none keeps out
# of reach, and the size of the token file.
command='echo hi > /workspace/ok.txt && cat /workspace/ok.txt; echo x > /run/bashexec/escape; curl -sS -m 3 -o /dev/null http://127.0.0.1:8080/livez && echo reached-the-server; echo "token-bytes:$(wc -c < /var/run/secrets/bashexec/token)"; true'
call="$(python3 -c 'import json,sys; print(json.dumps({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":sys.argv[1],"description":"container smoke"}}}))' "$command")"
result="$(curl -sS "${mcp[@]}" -d "$call" "$base_url/mcp" | sed -n 's/^data: //p' | grep '"id":2')"
echo "container-smoke: tools/call result: $result"
check "tools/call runs the command in the workspace" grep -q 'hi\\n' <<<"$result"
check "a write outside the workspace is refused by the sandbox" \
  grep -Eq 'escape: (Permission denied|Read-only file system)' <<<"$result"
check "the command cannot reach the server's own port" not_in reached-the-server "$result"
backend="$(grep -o '"backend":"[a-z]*"' <<<"$result")"
check "the result names the confining backend ($backend)" test -n "$backend"
check "nothing was written outside the workspace" test ! -e "$run_dir/runtime/escape"
# Not a defence, a fact the docs state: commands run as the server's uid and
# may read its token file (docs/deploy-kubernetes.md, "The token file").
check "a command can read the token file (same uid; see the docs)" grep -q 'token-bytes:41' <<<"$result"

# The Deployment's startupProbe: a second bashexec in the container proves a
# backend can confine here.
check "the startupProbe command succeeds in the container" \
  quiet E exec "$name" /usr/local/bin/bashexec run --mode read-only --network none -- true

check "POST /exec/v1 without the token is 401" test "$(code -H 'Content-Type: application/json' -d '{}' "$base_url/exec/v1")" = 401
check "POST /exec/v1 with the token answers the executor protocol" bash -c \
  "curl -sS -H 'Authorization: Bearer $token' -H 'Content-Type: application/json' -d '{}' '$base_url/exec/v1' | grep -q '\"ok\":false'"

# remote_executor itself against the pod: the scale harness
# (benchmarks/remote_scale.cpp), small, with the pod as its one server —
# foreground runs, spaced runs and 1 MiB of output over four sessions.
# REMOTE_SCALE names a built bashexec_remote_scale; without it, it is built
# here (Release, the harness alone).
harness="${REMOTE_SCALE:-}"
if [ -z "$harness" ]; then
  cmake -S "$root" -B "$work/harness-build" -DCMAKE_BUILD_TYPE=Release -DBASHEXEC_BUILD_TESTS=OFF \
    -DBASHEXEC_BUILD_EXAMPLES=OFF -DBASHEXEC_BUILD_BENCHMARKS=ON >/dev/null 2>&1 &&
    cmake --build "$work/harness-build" --target bashexec_remote_scale -j "$(nproc)" >/dev/null 2>&1 &&
    harness="$work/harness-build/benchmarks/bashexec_remote_scale"
fi
if [ -n "$harness" ] && [ -x "$harness" ]; then
  check "remote_executor runs commands in the pod (4 sessions: runs, spaced runs, 1 MiB of output)" \
    quiet "$harness" --pod "$base_url/exec/v1" --token-file "$run_dir/secret/token" --sessions 4 --calls 3 \
    --big-sessions 1 --big-bytes 1048576 --spaced-calls 2 --spaced-ms 100
else
  check "the remote_executor harness builds (benchmarks/remote_scale.cpp)" false
fi

# kubectl port-forward: the container runtime dials the pod's loopback from
# inside its network namespace, from a process the pod cannot see.
pid="$(E inspect -f '{{.State.Pid}}' "$name" 2>/dev/null)"
if [ -n "$pid" ] && [ "$(id -u)" -eq 0 ] && command -v nsenter >/dev/null 2>&1; then
  answer="$(nsenter -t "$pid" -n curl -sS "${mcp[@]:0:6}" -d "$init" http://127.0.0.1:8080/mcp 2>&1)"
  echo "container-smoke: from the pod's network namespace, outside its processes: $answer"
  check "a loopback peer the server cannot see is refused (403, as kubectl port-forward is)" \
    grep -q 'a process this server cannot see' <<<"$answer"
fi

E stop -t 20 "$name" >/dev/null 2>&1
status="$(E inspect -f '{{.State.ExitCode}}' "$name" 2>/dev/null)"
check "SIGTERM: the server exits 143 (got $status)" test "$status" = 143

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
