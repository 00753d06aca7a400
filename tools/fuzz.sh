#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) in the clang sanitizer build (build-asan, shared with the
# ASan/UBSan unit tests) and runs each for SECONDS (default 60) on a scratch copy of its committed corpus.
# Usage: tools/fuzz.sh [SECONDS] [HARNESS...]   (e.g. tools/fuzz.sh 300 request tool_call)
# FUZZ_JOBS=N runs N harnesses at a time (default 1). Logs, grown corpora and crash inputs are left in
# build-asan/fuzz-work/NAME/; a summary line per harness (executions, coverage, result) ends the output.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
all=(request responses_request safetensors model_config tokenizer_json tokenizer_encode stream_detokenizer chat_template tool_call
     reasoning grammar grammar_bytes)
if [ $# -gt 0 ]; then harnesses=("$@"); else harnesses=("${all[@]}"); fi

CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPARK_SANITIZE=ON \
  -DSPARK_WERROR=ON >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=("spark-fuzz-$h"); done
cmake --build build-asan -j"$(nproc)" --target "${targets[@]}"

run_one() {
  local h=$1 work=build-asan/fuzz-work/$1
  mkdir -p "$work"
  if bash tests/fuzz/run_harness.sh "build-asan/bin/spark-fuzz-$h" tests/fuzz "$h" "$work/run" "$seconds" \
      >"$work/log" 2>&1; then
    result=ok
  else
    result="FAILED (see $work/log and $work/run/artifacts)"
  fi
  local execs cov
  execs=$(grep -a -o 'stat::number_of_executed_units: [0-9]*' "$work/log" | grep -o '[0-9]*$' || true)
  cov=$(grep -a -o 'cov: [0-9]*' "$work/log" | tail -1 | grep -o '[0-9]*$' || true)
  printf '%-20s %10s execs  cov %6s  %s\n' "$h" "${execs:-?}" "${cov:-?}" "$result" | tee "$work/summary"
  [ "$result" = ok ]
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
