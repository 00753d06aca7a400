#!/usr/bin/env bash
# Regenerates the tables at the top of bench/RESULTS.md on this machine: the 1.7B shape (random weights) at
# 2 threads, pp512 / tg128 per weight format at every tier the CPU has (the best one, then each lower one
# through SPARK_FORCE_ISA), each row beside its measured ceiling; the concurrency sweep; the GEMM shapes
# alone (spark-kernels-bench, every tier); pre-quantized checkpoints; and bench/FIDELITY.md. The notes
# below the marker line (what each session changed and measured) are kept. Run on an otherwise idle
# machine: about 40 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
unset SPARK_FORCE_ISA SPARK_DISABLE_CPU_FEATURES  # each section sets its tier itself
threads=${THREADS:-2}
reps=${REPS:-3}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target spark-bench spark-kernels-bench spark-quantize spark-make-checkpoint \
  spark-server >/dev/null
bench=build/bin/spark-bench
out=bench/RESULTS.md
marker='<!-- bench/run-results.sh rewrites everything above this line; the notes below are kept -->'
tmp=$(mktemp -d)
# The new files are written beside their targets, so the final mv is a rename (never a partial RESULTS.md).
results_new=$(mktemp bench/.RESULTS.md.XXXXXX)
fidelity_new=$(mktemp bench/.FIDELITY.md.XXXXXX)
trap 'rm -rf "$tmp" "$results_new" "$fidelity_new"' EXIT

# The tiers this CPU runs, best first ("best tier: amx, active tier: amx" -> amx avx512 avx2). The report is
# read once: `hw | grep -q` could end hw with SIGPIPE, which pipefail would turn into a wrong answer.
hw=$(build/bin/spark-server hw)
best=$(sed -n 's/^best tier: \([a-z0-9]*\),.*/\1/p' <<<"$hw")
cpu=$(sed -n 's/^cpu: //p' <<<"$hw")
[[ -n $best ]] || { echo "run-results.sh: no 'best tier' in spark-server hw" >&2; exit 1; }
case "$best" in
  amx) tiers="amx avx512 avx2" ;;
  avx512) tiers="avx512 avx2" ;;
  avx2) tiers="avx2" ;;
  *) tiers="$best" ;;
esac
# bf16act (bf16 weights, bf16 activations) only where the tier has bf16 dot products.
formats_at() {
  if [[ $1 == avx2 ]] || ! grep -q 'avx512 f/bw/vl/dq: yes.*bf16: yes' <<<"$hw"; then
    echo bf16,int8,w4a8,w4a16
  else
    echo bf16,bf16act,int8,w4a8,w4a16
  fi
}

# A 1.7B checkpoint on disk (random bf16 weights) and its pre-quantized copies, for start-up and fidelity.
build/bin/spark-make-checkpoint --preset spark-x2.5-1.7b -o "$tmp/bf16" >/dev/null
for f in w4a8 w4a16; do build/bin/spark-quantize -m "$tmp/bf16" -o "$tmp/$f" -f "$f" -t "$threads" >/dev/null; done
{
  echo "# spark-bench results"
  echo
  echo "$(date -u +%Y-%m-%d), commit $(git rev-parse --short=12 HEAD), $cpu," \
       "$(nproc) CPUs, $threads threads, tiers $tiers. Regenerate with \`bench/run-results.sh\`."
  echo
  echo "## Ceilings (measured, active tier)"
  echo
  "$bench" --roofline -t "$threads"
  for tier in $tiers; do
    echo
    echo "## Prefill and decode per format at tier $tier (Spark-X2.5-1.7B shape, random weights)"
    echo
    echo "Each row's ceiling is measured in the same run at the same tier (\`--of-ceiling\`): decode against the"
    echo "read bandwidth over the weight bytes, prefill against the peak of the instructions the tier multiplies with;"
    echo "each the higher of two measurements, just before and just after the format's runs."
    echo
    SPARK_FORCE_ISA=$tier "$bench" --random-weights spark-x2.5-1.7b -t "$threads" -p 512 -n 128 -r "$reps" \
      --quant "$(formats_at "$tier")" --of-ceiling
  done
  # The AVX2 tier's integer tiles take AVX-VNNI's vpdpbusd where the CPU has it; AVX2 CPUs without it
  # (Zen 2 / 3, Skylake and older) run vpmaddubsw: those rows too, with the feature turned off.
  if [[ " $tiers " == *" avx2 "* ]] && grep -q 'avx-vnni: yes' <<<"$hw"; then
    echo
    echo "## Prefill and decode at tier avx2 without AVX-VNNI (\`SPARK_DISABLE_CPU_FEATURES=avx_vnni\`)"
    echo
    SPARK_FORCE_ISA=avx2 SPARK_DISABLE_CPU_FEATURES=avx_vnni "$bench" --random-weights spark-x2.5-1.7b \
      -t "$threads" -p 512 -n 128 -r "$reps" --quant int8,w4a8 --of-ceiling
  fi
  echo
  echo "## Concurrency: total generated tokens/s, 128-token prompts, 128 new tokens each (tier $best)"
  echo
  "$bench" --random-weights spark-x2.5-1.7b -t "$threads" -p 0 -n 0 -r 1 --quant int8,w4a8,w4a16 \
    --concurrency 1,2,4,8,16,32,64 --plot bench/concurrency.svg
  echo
  echo "## Each GEMM shape alone (spark-kernels-bench, every tier, cold caches)"
  echo
  echo "\`of roof\`: at M = 1 the weight bytes per second against the read bandwidth, above it the arithmetic"
  echo "against the peak of the instructions the kernel multiplies with (both measured in the same run)."
  echo
  build/bin/spark-kernels-bench --threads "$threads" --tiers all --m 1,16,64,512 \
    --formats w4a8,w4a16,int8,bf16,bf16act --reps 5 --budget 4 | sed '1s/^# /### /'
  echo
  echo "## Pre-quantized checkpoints (spark-quantize output): load by mmap, decode (tier $best)"
  echo
  for f in w4a8 w4a16; do
    "$bench" -m "$tmp/$f" -t "$threads" -p 0 -n 128 -r "$reps" --of-ceiling | sed "s|$tmp/||"
    echo
  done
  echo "Fidelity of each format against f32 on this checkpoint: \`bench/FIDELITY.md\`."
  echo
  echo "$marker"
  # The notes of earlier sessions: everything below the marker, or the whole old file the first time.
  if [[ -f $out ]]; then
    if grep -qxF "$marker" "$out"; then
      awk -v m="$marker" 'kept { print } $0 == m { kept = 1 }' "$out"
    else
      echo
      cat "$out"
    fi
  fi
} > "$results_new"
mv "$results_new" "$out"
echo "wrote $out"
{
  echo "# Quantization fidelity, Spark-X2.5-1.7B shape, random weights"
  echo
  echo "$(date -u +%Y-%m-%d), commit $(git rev-parse --short=12 HEAD). Regenerate with \`bench/run-results.sh\`."
  echo "Random weights make every layer matter equally and have no outliers, so these figures rank the formats"
  echo "rather than predict a trained model's agreement."
  echo
  build/bin/spark-quantize -m "$tmp/bf16" --report -t "$threads" | sed "s|$tmp/||"
} > "$fidelity_new"
mv "$fidelity_new" bench/FIDELITY.md
echo "wrote bench/FIDELITY.md"
