#!/usr/bin/env bash
# Regenerates bench/RESULTS.md: the 1.7B shape (random weights) at 2 threads, pp512 / tg128 per weight
# format, the concurrency sweep, and the machine's measured ceilings. Run on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2}
reps=${REPS:-3}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target spark-bench >/dev/null
bench=build/bin/spark-bench
out=bench/RESULTS.md
{
  echo "# spark-bench results"
  echo
  echo "$(date -u +%Y-%m-%d), commit $(git rev-parse --short=12 HEAD), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
       "$(nproc) CPUs, $threads threads. Regenerate with \`bench/run-results.sh\`."
  echo
  echo "## Ceilings (measured)"
  echo
  "$bench" --roofline -t "$threads"
  echo
  echo "## Prefill and decode per format (Spark-X2.5-1.7B shape, random weights)"
  echo
  "$bench" --random-weights spark-x2.5-1.7b -t "$threads" -p 512 -n 128 -r "$reps" --quant bf16,int8,w4a8,w4a16
  echo
  echo "## Concurrency: total generated tokens/s, 128-token prompts, 128 new tokens each"
  echo
  "$bench" --random-weights spark-x2.5-1.7b -t "$threads" -p 0 -n 0 -r 1 --quant int8,w4a8 \
    --concurrency 1,2,4,8,16,32,64 --plot bench/concurrency.svg
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
