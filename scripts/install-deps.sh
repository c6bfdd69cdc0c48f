#!/usr/bin/env bash
# Installs the Debian 12 packages bashexec builds, tests and runs with.
# Idempotent: packages already present are not touched, and apt is not
# called at all when nothing is missing. Installs only from Debian's archive.
set -euo pipefail

packages=(
  g++ cmake make pkg-config            # toolchain
  libboost-dev libfmt-dev nlohmann-json3-dev libseccomp-dev  # library deps
  catch2 libbenchmark-dev              # tests and benchmarks
  bubblewrap util-linux procps         # sandbox backend (+ setpriv, script); ps/pgrep for tests
  clang-14 libfuzzer-14-dev llvm-14    # fuzz lane (scripts/run-fuzz.sh); llvm-symbolizer for its reports
  python3                              # the stdlib MCP and serve tests (tests/mcp, examples/), benchmarks/soak_serve.py, the network tests' helper servers
)

# The MCP SDK test (tests/mcp) needs node and npm; a machine that already has
# them (from NodeSource, nvm, …) keeps its own, otherwise Debian's come in.
if ! command -v node >/dev/null 2>&1; then packages+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: run as root (or install these packages yourself): ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
