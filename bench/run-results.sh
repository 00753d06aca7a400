#!/usr/bin/env bash
# Regenerates bench/RESULTS.md: the 1.7B shape (random weights) at 2 threads, pp512 / tg128 per weight
# format, the concurrency sweep, and the machine's measured ceilings. Run on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${THREADS:-2}
reps=${REPS:-3}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target spark-bench spark-quantize spark-make-checkpoint >/dev/null
bench=build/bin/spark-bench
out=bench/RESULTS.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A 1.7B checkpoint on disk (random bf16 weights) and its pre-quantized copies, for start-up and fidelity.
build/bin/spark-make-checkpoint --preset spark-x2.5-1.7b -o "$tmp/bf16" >/dev/null
for f in w4a8 w4a16; do build/bin/spark-quantize -m "$tmp/bf16" -o "$tmp/$f" -f "$f" -t "$threads" >/dev/null; done
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
  echo
  echo "## The AVX2 kernels on this machine (SPARK_FORCE_ISA=avx2: what a CPU without AVX-512 / AMX runs)"
  echo
  SPARK_FORCE_ISA=avx2 "$bench" --random-weights spark-x2.5-1.7b -t "$threads" -p 512 -n 128 -r "$reps" \
    --quant int8,w4a8,w4a16
  echo
  echo "## Pre-quantized checkpoints (spark-quantize output): load by mmap, decode"
  echo
  for f in w4a8 w4a16; do
    "$bench" -m "$tmp/$f" -t "$threads" -p 0 -n 128 -r "$reps" | sed "s|$tmp/||"
    echo
  done
  echo "Fidelity of each format against f32 on this checkpoint: \`bench/FIDELITY.md\`."
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
{
  echo "# Quantization fidelity, Spark-X2.5-1.7B shape, random weights"
  echo
  echo "$(date -u +%Y-%m-%d), commit $(git rev-parse --short=12 HEAD). Regenerate with \`bench/run-results.sh\`."
  echo "Random weights make every layer matter equally and have no outliers, so these figures rank the formats"
  echo "rather than predict a trained model's agreement."
  echo
  build/bin/spark-quantize -m "$tmp/bf16" --report -t "$threads" | sed "s|$tmp/||"
} > bench/FIDELITY.md.tmp
mv bench/FIDELITY.md.tmp bench/FIDELITY.md
echo "wrote bench/FIDELITY.md"
