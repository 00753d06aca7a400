#!/usr/bin/env bash
# Copies the client tests (and the server tests' lib.mjs, which starts spark-server) next to their
# node_modules in the build dir and installs the pinned npm packages (package-lock.json) there, again only
# when the lockfile changed.
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
dest=$1
mkdir -p "$dest"
cp "$src"/*.mjs "$src"/package.json "$src"/package-lock.json "$src"/../server/lib.mjs "$dest"/
if [ ! -f "$dest/node_modules/.spark-lock" ] || ! cmp -s "$src/package-lock.json" "$dest/node_modules/.spark-lock"; then
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$src/package-lock.json" "$dest/node_modules/.spark-lock"
fi
