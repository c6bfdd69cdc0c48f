#!/usr/bin/env bash
# check-catch-count.sh BUILD_DIR RUN_LOG: proves that the CTest run which
# just finished executed every Catch2 case exactly once.
#
# - listed: what each Catch2 executable lists (`--list-test-names-only`, one
#   name per line, never wrapped); the executables are the ones CTest
#   discovers, from BUILD_DIR/catch2_executables.txt (tests/CMakeLists.txt).
# - entries: the CTest entries labelled catch2 (one per discovered name).
# - executed: the cases that really started under CTest, from RUN_LOG, which
#   the shared Catch2 main appends to when BASHEXEC_CATCH_RUN_LOG names it
#   (tests/catch_main.cpp).
#
# Fails when the three counts differ, when a case ran twice or never, or when
# something ran that nobody listed. A name CTest discovery mangles (it splits
# at ';') shows up here as entries > listed and as a case that never ran.
set -euo pipefail

build=${1:?usage: check-catch-count.sh BUILD_DIR RUN_LOG}
log=${2:?usage: check-catch-count.sh BUILD_DIR RUN_LOG}
manifest=$build/catch2_executables.txt
export LC_ALL=C

[[ -f $manifest ]] || { echo "check-catch-count: $manifest is missing (configure with BASHEXEC_BUILD_TESTS=ON)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

: >"$work/listed"
: >"$work/executables"
while IFS= read -r exe; do
  [[ -n $exe ]] || continue
  name=$(basename "$exe")
  printf '%s\n' "$name" >>"$work/executables"
  # Catch2 2.13 exits with the number of cases listed (at most 255).
  rc=0
  "$exe" --list-test-names-only >"$work/names" || rc=$?
  sed -i '/^$/d' "$work/names"
  count=$(wc -l <"$work/names")
  if ((rc != (count < 255 ? count : 255))); then
    echo "check-catch-count: $name --list-test-names-only exited $rc after listing $count cases" >&2
    exit 1
  fi
  sed "s/^/$name\t/" "$work/names" >>"$work/listed"
done <"$manifest"
sort "$work/listed" -o "$work/listed"

# Only the executables CTest discovers count (the TSan build of
# test_concurrency shares the Catch2 main but is one entry of its own).
touch "$log"
awk -F'\t' 'NR == FNR { keep[$0] = 1; next } ($1 in keep)' "$work/executables" "$log" | sort >"$work/executed"

entries=$(cd "$build" && ctest -N -L '^catch2$' | sed -n 's/^Total Tests: *//p')
listed=$(wc -l <"$work/listed")
executed=$(wc -l <"$work/executed")
echo "catch2 cases listed: $listed, ctest executed: $executed (catch2 CTest entries: $entries)"

status=0
report() { # title file
  if [[ -s $2 ]]; then
    echo "check-catch-count: $1:" >&2
    head -n 20 "$2" | sed 's/^/  /' >&2
    status=1
  fi
}
uniq -d "$work/executed" >"$work/twice"
sort -u "$work/executed" >"$work/executed-once"
comm -23 "$work/listed" "$work/executed-once" >"$work/missing"
comm -13 "$work/listed" "$work/executed-once" >"$work/extra"
report "cases that ran more than once" "$work/twice"
report "listed cases that never ran" "$work/missing"
report "cases that ran but are not listed" "$work/extra"
if ! [[ $listed == "$executed" && $listed == "$entries" ]]; then
  echo "check-catch-count: the counts differ" >&2
  status=1
fi
exit "$status"
