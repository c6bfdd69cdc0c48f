#!/usr/bin/env bash
# measure-umbrella.sh: what including <bashexec/bashexec.hpp> costs a
# translation unit, in both modes, next to its floor — a file that includes
# only the standard and {fmt} headers the public types themselves need.
#
#   scripts/measure-umbrella.sh            # 5 alternating rounds
#   ROUNDS=9 CXX=g++ scripts/measure-umbrella.sh
#
# Each round compiles the three files (`$CXX -std=c++20 -O2 -c`) one after the
# other, so load swings hit all three alike; the table gives the median wall
# and user+system times, each mode's ratio to the floor, and GCC's own GGC
# allocation (`-ftime-report`'s TOTAL), which does not depend on load.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cxx=${CXX:-g++}
rounds=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo '#include <bashexec/bashexec.hpp>' >"$work/umbrella.cpp"
printf '#include <%s>\n' chrono filesystem functional map optional stop_token string string_view vector \
  fmt/core.h >"$work/floor.cpp"

declare -A flags=([floor]="" [header-only]="" [compiled]="-DBASHEXEC_SEPARATE_COMPILATION")
declare -A source=([floor]=floor.cpp [header-only]=umbrella.cpp [compiled]=umbrella.cpp)
modes=(floor header-only compiled)

compile() {  # mode -> "wall cpu" in seconds
  local mode=$1
  /usr/bin/time -f '%e %U %S' -o "$work/time" \
    "$cxx" -std=c++20 -O2 -I"$root/include" ${flags[$mode]} -c "$work/${source[$mode]}" -o "$work/out.o"
  awk '{printf "%s %.2f\n", $1, $2 + $3}' "$work/time"
}

for mode in "${modes[@]}"; do : >"$work/$mode.times"; done
for ((round = 1; round <= rounds; ++round)); do
  for mode in "${modes[@]}"; do compile "$mode" >>"$work/$mode.times"; done
  printf 'round %d of %d\r' "$round" "$rounds" >&2
done
printf '\n' >&2

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
ggc() {
  "$cxx" -std=c++20 -O2 -I"$root/include" ${flags[$1]} -c "$work/${source[$1]}" -o "$work/out.o" -ftime-report 2>&1 |
    awk '/^ TOTAL/ {print $NF}'
}

floor_wall=$(cut -d' ' -f1 "$work/floor.times" | median)
floor_cpu=$(cut -d' ' -f2 "$work/floor.times" | median)
printf '%-12s %9s %9s %13s %13s %8s\n' mode "wall s" "cpu s" "wall/floor" "cpu/floor" GGC
for mode in "${modes[@]}"; do
  wall=$(cut -d' ' -f1 "$work/$mode.times" | median)
  cpu=$(cut -d' ' -f2 "$work/$mode.times" | median)
  awk -v m="$mode" -v w="$wall" -v c="$cpu" -v fw="$floor_wall" -v fc="$floor_cpu" -v g="$(ggc "$mode")" \
    'BEGIN {printf "%-12s %9s %9s %13.2f %13.2f %8s\n", m, w, c, w / fw, c / fc, g}'
done
echo "($cxx, median of $rounds rounds, load average $(cut -d' ' -f1 /proc/loadavg) at the end)"
