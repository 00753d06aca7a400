#!/usr/bin/env bash
# Copies the server tests next to their node_modules in the build dir (ESM imports resolve relative to the
# script) and installs the pinned npm packages (package-lock.json) there once.
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
dest=$1
mkdir -p "$dest"
cp "$src"/*.mjs "$src"/package.json "$src"/package-lock.json "$dest"/
if [ ! -f "$dest/node_modules/openai/package.json" ] || ! grep -q '"version": "6.30.1"' "$dest/node_modules/openai/package.json" ||
   [ ! -f "$dest/node_modules/ajv/package.json" ] || ! grep -q '"version": "8.17.1"' "$dest/node_modules/ajv/package.json"; then
  (cd "$dest" && npm install --no-audit --no-fund --loglevel=error)
fi
