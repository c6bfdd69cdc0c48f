#!/usr/bin/env bash
# Validates every manifest under deploy/kubernetes/ offline — no cluster, no
# download but Debian's archive and the npm registry — against the official
# Kubernetes API schema and agent-sandbox's CRD schemas, and checks that the
# deliberately broken manifests under tests/deploy/bad/ are all rejected
# (tests/deploy/validate.mjs says how). Closes with "N passed, N failed";
# exits non-zero on any failure.
#
# Dependencies: node and npm (Debian's nodejs and npm when the machine has
# none), and the npm packages pinned by tests/deploy/package-lock.json,
# installed with `npm ci` into tests/deploy/node_modules. That install is
# reused while the lock file is unchanged, so a repeated run costs about a
# second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "validate_manifests: node and npm are needed (apt-get install nodejs npm)" >&2
    exit 1
  fi
  echo "validate_manifests: installing Debian's nodejs and npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm
fi

# npm ci only when node_modules is missing or was made from another lock.
lock_hash="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
stamp="$here/node_modules/.validate-manifests-lock"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_hash" ]; then
  echo "validate_manifests: npm ci (tests/deploy/package-lock.json)"
  # --ignore-scripts: nothing of a package runs at install; engine warnings
  # (kubernetes-models asks for Node 22; what it is used for here runs on 18+)
  # are not errors.
  (cd "$here" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  echo "$lock_hash" > "$stamp"
fi

shopt -s nullglob
good=("$root"/deploy/kubernetes/*.yaml "$root"/deploy/kubernetes/*/*.yaml)
bad=("$here"/bad/*.yaml)
if ((${#good[@]} == 0 || ${#bad[@]} == 0)); then
  echo "validate_manifests: no manifests found under deploy/kubernetes/ or tests/deploy/bad/" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

cd "$root"
exec node "$here/validate.mjs" --good "${good[@]#"$root"/}" --bad "${bad[@]#"$root"/}"
