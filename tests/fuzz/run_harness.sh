#!/usr/bin/env bash
# Runs one libFuzzer harness: copies the committed corpus (tests/fuzz/corpus/NAME, which also holds the
# inputs of bugs already fixed; or another harness's corpus and dictionary, named in tests/fuzz/NAME.seeds)
# into WORK_DIR, replays it, then fuzzes for SECONDS more. New inputs and crash artifacts stay under
# WORK_DIR; the committed corpus is never written. Exits non-zero on any crash, sanitizer report, timeout or
# OOM. Usage: run_harness.sh BINARY FUZZ_DIR NAME WORK_DIR SECONDS [libFuzzer flags...]
set -euo pipefail
binary=$1 fuzz_dir=$2 name=$3 work=$4 seconds=$5
shift 5

seeds=$name
if [ -f "$fuzz_dir/$name.seeds" ]; then
  seeds=$(cat "$fuzz_dir/$name.seeds")
fi

rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$fuzz_dir/corpus/$seeds"/* "$work/corpus/"
flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
       -artifact_prefix="$work/artifacts/")
if [ -f "$fuzz_dir/$seeds.dict" ]; then
  flags+=(-dict="$fuzz_dir/$seeds.dict")
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
"$binary" "${flags[@]}" "$@" "$work/corpus"
