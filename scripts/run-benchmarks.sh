#!/usr/bin/env bash
# run-benchmarks.sh: the one command for bashexec's benchmarks — builds the
# suite in Release, runs it (about four minutes on two cores), writes the
# full results as JSON and prints a summary table of ratios to the floors.
#
#   scripts/run-benchmarks.sh                      # everything, 3 repetitions
#   scripts/run-benchmarks.sh --benchmark_filter=^spawn/   # extra flags go to the binary
#
# Environment: BASHEXEC_BENCH_BUILD (build dir, default build-bench),
# BASHEXEC_BENCH_OUT (JSON file, default <build>/benchmarks.json),
# BASHEXEC_BENCH_REPETITIONS (default 3), BASHEXEC_BENCH_SCALE (divide the
# stream sizes, for quick looks; headline figures use 1), TMPDIR (where spill
# and floor files go — the floor is measured on the same filesystem).
#
# Opt-in soak of `bashexec serve` (benchmarks/soak_serve.py; 10 minutes by
# default, so never part of the normal run): BASHEXEC_SOAK=1 runs it after the
# suite, BASHEXEC_SOAK=only runs it alone. BASHEXEC_SOAK_SECONDS (default
# 600), BASHEXEC_SOAK_SESSIONS (default 50); its JSON report goes next to
# the suite's (<build>/soak.json).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BASHEXEC_BENCH_BUILD:-$root/build-bench}
out=${BASHEXEC_BENCH_OUT:-$build/benchmarks.json}
repetitions=${BASHEXEC_BENCH_REPETITIONS:-3}
soak=${BASHEXEC_SOAK:-0}
case $soak in
  0 | 1 | only) ;;
  *) echo "run-benchmarks: BASHEXEC_SOAK must be 0, 1 or only, not '$soak'" >&2; exit 2 ;;
esac

# Dependencies: the project's installer when present, else just Google Benchmark.
if [[ -x $root/scripts/install-deps.sh ]]; then
  "$root/scripts/install-deps.sh"
elif ! dpkg -s libbenchmark-dev >/dev/null 2>&1; then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y libbenchmark-dev
fi

examples=OFF
[[ $soak == 0 ]] || examples=ON  # the soak drives the real bashexec program
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBASHEXEC_BUILD_BENCHMARKS=ON \
  -DBASHEXEC_BUILD_TESTS=OFF -DBASHEXEC_BUILD_EXAMPLES=$examples >/dev/null
targets=()
[[ $soak == only ]] || targets+=(bashexec_bench)
[[ $soak == 0 ]] || targets+=(bashexec_cli)
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)"

mkdir -p "$(dirname "$out")"
echo "machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
if [[ $soak != only ]]; then
  # Floors and subjects are paired inside each iteration; repetitions are
  # interleaved across cases, and the summary reports medians of the ratios.
  "$build/benchmarks/bashexec_bench" \
    --benchmark_repetitions="$repetitions" \
    --benchmark_enable_random_interleaving=true \
    --benchmark_out="$out" --benchmark_out_format=json \
    --benchmark_counters_tabular=true \
    "$@"
fi
if [[ $soak != 0 ]]; then
  python3 "$root/benchmarks/soak_serve.py" --cli "$build/apps/bashexec" \
    --seconds "${BASHEXEC_SOAK_SECONDS:-600}" --sessions "${BASHEXEC_SOAK_SESSIONS:-50}" \
    --json "$build/soak.json"
fi
