#!/usr/bin/env bash
# Builds everything and runs the whole test suite: the Release build's unit, golden and server tests,
# then the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (separate build dir).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARK_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure --no-tests=error

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_SANITIZE=ON -DSPARK_WERROR=ON
cmake --build build-asan -j"$jobs" --target spark-unit-test-executables
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L unit --output-on-failure --no-tests=error
