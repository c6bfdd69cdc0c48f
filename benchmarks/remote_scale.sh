#!/usr/bin/env bash
# remote_scale.sh: issue 30's scale test, simulated on one machine. PODS
# "pods" — each a network namespace joined to this one by a veth pair
# (tests/remote_host.sh), with `bashexec mcp --http ADDR:8080 --executor-api
# --token-file F` serving in it — and one harness (benchmarks/remote_scale.cpp)
# spreading SESSIONS sessions over them with remote_executor, against the
# same harness with sandbox_executor in-process, in one run. Then pod 0's
# server is SIGKILLed while every session runs a command: its sessions must
# fail fast and clearly, the others must finish, and afterwards no command
# may be left on any pod (a marker in each command line), and each surviving
# server must exit 143 on SIGTERM.
#
#   benchmarks/remote_scale.sh --cli BUILD/apps/bashexec/bashexec \
#       --harness BUILD/benchmarks/bashexec_remote_scale [--json OUT]
#
# Environment: PODS (8), SESSIONS (200), CALLS (20), BIG_SESSIONS (8),
# BIG_BYTES (10 MiB), SPACED_CALLS (5), SPACED_MS (2000: each session's calls
# that far apart, as agents make them). Root only (namespaces); every address is in the
# 10.205.0.0/16 ranges of the namespaces it makes. Exit 0 when every check
# held, 77 (skipped) without root.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cli= harness= json=
while [[ $# -gt 0 ]]; do
  case $1 in
    --cli) cli=$2; shift 2 ;;
    --harness) harness=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    *) echo "usage: remote_scale.sh --cli PATH --harness PATH [--json OUT]" >&2; exit 2 ;;
  esac
done
[[ -x $cli && -x $harness ]] || { echo "remote_scale.sh: --cli and --harness must name programs" >&2; exit 2; }
if [[ $(id -u) -ne 0 ]]; then echo "skipped: the pods need root (network namespaces)"; exit 77; fi
pods=${PODS:-8}
work=$(mktemp -d /tmp/bashexec-scale.XXXXXX)
chmod 755 "$work"
token_file=$work/token
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token_file"
chmod 600 "$token_file"
tag=$(printf '%04x' $(($$ % 65536)))
names=() pids=() urls=()

cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  for name in "${names[@]}"; do sh "$root/tests/remote_host.sh" teardown "$name" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT

for ((i = 0; i < pods; i++)); do
  name=bxsc${tag}p$i
  prefix=""
  for ((attempt = 0; attempt < 50; attempt++)); do
    candidate="10.205.$(((($$ + i * 7 + attempt * 13) % 200) + 20))"
    sh "$root/tests/remote_host.sh" setup "$name" "$candidate" >/dev/null
    status=$?
    [[ $status -eq 3 ]] && continue
    [[ $status -eq 0 ]] || { echo "remote_scale.sh: remote_host.sh setup failed ($status)" >&2; exit 1; }
    prefix=$candidate
    break
  done
  [[ -n $prefix ]] || { echo "remote_scale.sh: no free /24 for pod $i" >&2; exit 1; }
  names+=("$name")
  holder=$(cat "/var/tmp/bashexec-remote-$name/pid.holder")
  nsenter -t "$holder" -n -- "$cli" mcp --http "$prefix.2:8080" --token-file "$token_file" --executor-api \
    --max-sessions 256 --workdir "$work" 2>"$work/pod$i.log" &
  pids+=($!)
  urls+=("http://$prefix.2:8080/exec/v1")
done
for ((i = 0; i < pods; i++)); do
  for ((t = 0; t < 100; t++)); do
    grep -q "executor protocol at" "$work/pod$i.log" && break
    sleep 0.05
  done
  grep -q "executor protocol at" "$work/pod$i.log" || { echo "remote_scale.sh: pod $i did not start:" >&2; cat "$work/pod$i.log" >&2; exit 1; }
done

args=(--token-file "$token_file" --sessions "${SESSIONS:-200}" --calls "${CALLS:-20}"
      --big-sessions "${BIG_SESSIONS:-8}" --big-bytes "${BIG_BYTES:-10485760}"
      --spaced-calls "${SPACED_CALLS:-5}" --spaced-ms "${SPACED_MS:-2000}" --kill-pid "${pids[0]}" --kill-pod 0)
for url in "${urls[@]}"; do args+=(--pod "$url"); done
[[ -n $json ]] && args+=(--json "$json")
"$harness" "${args[@]}"
status=$?
wait "${pids[0]}" 2>/dev/null  # the SIGKILLed pod

# Nothing left behind: no command of the kill phase anywhere (the killed
# pod's die with their server: cgroup or parent-death kill), after the grace.
for ((t = 0; t < 50; t++)); do
  pgrep -f bx-scale-marker >/dev/null || break
  sleep 0.1
done
if pgrep -af bx-scale-marker; then
  echo "remote_scale.sh: FAILED: commands left behind (above)"
  status=1
else
  echo "remote_scale.sh: no command left on any pod"
fi
for ((i = 1; i < pods; i++)); do
  kill -TERM "${pids[$i]}"
  wait "${pids[$i]}"
  code=$?
  if [[ $code -ne 143 ]]; then
    echo "remote_scale.sh: FAILED: pod $i's server exited $code on SIGTERM, not 143"
    status=1
  fi
done
pids=("${pids[0]}")
[[ $status -eq 0 ]] && echo "remote_scale.sh: every check held" || echo "remote_scale.sh: a check failed"
exit "$status"
