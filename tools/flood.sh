#!/usr/bin/env bash
# Connection flood against a fresh spark-server on 127.0.0.1 (tests/soak/flood.mjs): a third idle
# keep-alives, a third slow senders, a third real requests, all at once; prints per-request answer times,
# statuses, the slow senders' fate and the server's RssAnon, and fails if any real request waited over 2 s.
#   tools/flood.sh [CONNECTIONS] [extra spark-server flags...]     e.g. tools/flood.sh 1000
set -euo pipefail
cd "$(dirname "$0")/.."
connections=${1:-1000}
shift || true
bin=${SPARK_BIN_DIR:-build/bin}
[ -x "$bin/spark-server" ] || { echo "flood: $bin/spark-server not built (cmake --build build)" >&2; exit 1; }
exec node tests/soak/flood.mjs --bin "$bin" --connections "$connections" --server-args "$*"
