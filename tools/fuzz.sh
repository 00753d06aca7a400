#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) in the clang sanitizer build (build-asan, shared with the
# ASan/UBSan unit tests) and runs each for SECONDS (default 60) on a scratch copy of its committed corpus.
# Usage: tools/fuzz.sh [SECONDS] [HARNESS...]   (e.g. tools/fuzz.sh 300 request tool_call)
# FUZZ_JOBS=N runs N harnesses at a time (default 1). Logs, grown corpora and crash inputs are left in
# BUILD/fuzz-work/NAME/; a summary line per harness (executions, coverage, result) ends the output.
# FUZZ_BUILD=campaign fuzzes in build-fuzz instead (clang Release, libFuzzer, libstdc++ bounds checks, no
# ASan: ~7x the executions a second on the grammar harnesses) and then replays every input each run kept
# through the ASan + UBSan harness of build-asan: the long campaigns of tests/fuzz/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
all=(request responses_request safetensors model_config tokenizer_json tokenizer_encode stream_detokenizer chat_template tool_call
     reasoning grammar grammar_bytes)
if [ $# -gt 0 ]; then harnesses=("$@"); else harnesses=("${all[@]}"); fi

targets=()
for h in "${harnesses[@]}"; do targets+=("spark-fuzz-$h"); done
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_SANITIZE=ON \
  -DSPARK_WERROR=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target "${targets[@]}"
build=build-asan
if [ "${FUZZ_BUILD:-asan}" = campaign ]; then
  build=build-fuzz
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARK_FUZZ_CAMPAIGN=ON \
    -DSPARK_WERROR=ON >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"
elif [ "${FUZZ_BUILD:-asan}" != asan ]; then
  echo "fuzz.sh: FUZZ_BUILD is asan (default) or campaign, not '$FUZZ_BUILD'" >&2
  exit 2
fi

run_one() {
  local h=$1 work=$build/fuzz-work/$1
  mkdir -p "$work"
  if bash tests/fuzz/run_harness.sh "$build/bin/spark-fuzz-$h" tests/fuzz "$h" "$work/run" "$seconds" \
      >"$work/log" 2>&1; then
    result=ok
  else
    result="FAILED (see $work/log and $work/run/artifacts)"
  fi
  # A campaign's kept inputs (the grown corpus) once more through ASan + UBSan: what the faster build
  # cannot see (a heap overflow inside a bound, a use after free) is caught on the same inputs here.
  if [ "$build" = build-fuzz ] && [ "$result" = ok ]; then
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "build-asan/bin/spark-fuzz-$h" -runs=0 -timeout=60 -rss_limit_mb=2048 -max_len=65536 \
        "$work/run/corpus" >"$work/replay.log" 2>&1; then
      result="ok (kept inputs replayed under ASan + UBSan)"
    else
      result="FAILED in the ASan + UBSan replay (see $work/replay.log)"
    fi
  fi
  local execs cov
  execs=$(grep -a -o 'stat::number_of_executed_units: [0-9]*' "$work/log" | grep -o '[0-9]*$' || true)
  cov=$(grep -a -o 'cov: [0-9]*' "$work/log" | tail -1 | grep -o '[0-9]*$' || true)
  printf '%-20s %10s execs  cov %6s  %s\n' "$h" "${execs:-?}" "${cov:-?}" "$result" | tee "$work/summary"
  [ "${result:0:2}" = ok ]
}

jobs=${FUZZ_JOBS:-1}
failed=0
pids=()
for h in "${harnesses[@]}"; do
  run_one "$h" & pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
