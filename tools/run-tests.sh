#!/usr/bin/env bash
# Builds everything and runs the whole test suite: the Release build's unit, golden and server tests,
# then the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (clang, separate build dir)
# and a short run of every fuzz harness.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install-deps.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARK_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure --no-tests=error

# The sanitizer build is clang's: the same ASan/UBSan libraries serve the unit tests and the libFuzzer
# harnesses (tests/fuzz), which then replay their committed corpora and fuzz briefly (label fuzz).
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_SANITIZE=ON \
  -DSPARK_WERROR=ON
cmake --build build-asan -j"$jobs" --target spark-unit-test-executables spark-fuzz-harnesses
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L unit --output-on-failure --no-tests=error
ctest --test-dir build-asan -L fuzz -j"$jobs" --output-on-failure --no-tests=error
