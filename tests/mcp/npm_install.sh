#!/usr/bin/env bash
# Installs the packages pinned by PACKAGE_DIR/package-lock.json with `npm ci`
# into WORK/node_modules (in the build tree), again only when the lock file
# changed. Exit 77 (CTest SKIP_RETURN_CODE) with the reason when node or npm
# is absent. Sourced by run.sh and run_conformance.sh.
# Usage: npm_install PACKAGE_DIR WORK
npm_install() {
  local package_dir=$1 work=$2
  for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
      echo "SKIP: $tool is not installed (scripts/install-deps.sh installs nodejs and npm)"
      exit 77
    fi
  done
  mkdir -p "$work"
  if ! cmp -s "$package_dir/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules" ]; then
    cp "$package_dir/package.json" "$package_dir/package-lock.json" "$work/"
    (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}
