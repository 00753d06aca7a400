#!/usr/bin/env bash
# Soak and fault run against a fresh spark-server on 127.0.0.1 (tests/soak/soak.mjs): mixed concurrent
# clients for a bounded time, then a connection flood, then leak checks. Loopback only.
#   tools/soak.sh [SECONDS] [CLIENTS] [FLOOD_CONNECTIONS]     e.g. tools/soak.sh 600 64 1000
# The 10-minute run writes bench/SOAK.md and its RssAnon plot; shorter runs only print their report.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
clients=${2:-64}
flood=${3:-1000}
bin=${SPARK_BIN_DIR:-build/bin}
[ -x "$bin/spark-server" ] || { echo "soak: $bin/spark-server not built (cmake --build build)" >&2; exit 1; }
report=()
if [ "$seconds" -ge 600 ]; then report=(--report bench/SOAK.md); fi
exec node tests/soak/soak.mjs --bin "$bin" --seconds "$seconds" --clients "$clients" --flood "$flood" "${report[@]}"
