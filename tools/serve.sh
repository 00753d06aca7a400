#!/usr/bin/env bash
# Installs dependencies, builds, and runs spark-server. Arguments go to spark-server; with none it
# serves the built-in demo checkpoint (random weights).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target spark-server
exec build/bin/spark-server "$@"
