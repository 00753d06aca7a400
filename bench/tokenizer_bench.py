#!/usr/bin/env python3
"""Tokenizer encode throughput, ours vs Hugging Face `tokenizers` (npm), on the same few MB of text
built from the tokenizer corpus, for the generated tiny (1024) and demo (4096) vocabularies. Both sides
run on one thread with a cold cache per run; the median of the runs is reported.

  bench/tokenizer_bench.py --bin-dir build/bin --work-dir build/bench-work --node-prefix build/node-tokenizer
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden"))
import tokenizer_npm  # noqa: E402


def run_json(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"`{' '.join(cmd)}` failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--node-prefix", required=True)
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--presets", nargs="+", default=["tiny", "demo"])
    args = ap.parse_args()
    module_dir = tokenizer_npm.ensure_tokenizers(args.node_prefix)
    os.makedirs(args.work_dir, exist_ok=True)
    bench = os.path.join(args.bin_dir, "spark-tokenizer-bench")
    text = os.path.join(args.work_dir, "tokenizer-bench.txt")
    subprocess.run([bench, "--mb", str(args.mb), "--write-text", text], check=True)
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer_bench.cjs")
    print(f"text: {os.path.getsize(text) / 1e6:.2f} MB, {args.runs} runs, median MB/s (1 thread, cold cache)")
    print(f"{'vocab':8s} {'mode':12s} {'ours':>8s} {'HF':>8s} {'ratio':>6s}")
    for preset in args.presets:
        folder = os.path.join(args.work_dir, f"tokenizer-bench-{preset}")
        subprocess.run([os.path.join(args.bin_dir, "spark-make-checkpoint"), "--preset", preset, "--out", folder],
                       check=True)
        ours = run_json([bench, "--model", folder, "--text", text, "--runs", str(args.runs)])
        ref = run_json(["node", script, module_dir, os.path.join(folder, "tokenizer.json"), text, str(args.runs)], env)
        if ours["ids_whole"] != ref["ids_whole"] or ours["ids_lines"] != ref["ids_lines"]:
            print(f"WARNING: id counts differ: ours {ours['ids_whole']}/{ours['ids_lines']}, "
                  f"HF {ref['ids_whole']}/{ref['ids_lines']}")
        for mode in ("whole", "lines"):
            a, b = ours[f"{mode}_median_mb_s"], ref[f"{mode}_median_mb_s"]
            print(f"{preset:8s} {mode + ' text' if mode == 'whole' else 'per line':12s} {a:8.2f} {b:8.2f} {a / b:5.2f}x")


if __name__ == "__main__":
    main()
