#!/usr/bin/python3
"""User-facing check of spark-quantize: a written checkpoint serves exactly what quantize-at-load serves
(`spark-server generate --json` output compared token for token and logit for logit), --report prints the
fidelity tables, and mistakes give one `error:` line and exit status 1 without touching anything.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys


def run(cmd, expect_rc=0):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if proc.returncode != expect_rc:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {proc.returncode}, expected {expect_rc}\n{proc.stdout}\n{proc.stderr}")
    return proc


def expect_one_error_line(proc, says):
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    if len(lines) != 1 or not lines[0].startswith("error: ") or says not in lines[0]:
        sys.exit(f"FAIL: expected one 'error: ...{says}...' line, got:\n{proc.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    make = os.path.join(args.bin_dir, "spark-make-checkpoint")
    quantize = os.path.join(args.bin_dir, "spark-quantize")
    server = os.path.join(args.bin_dir, "spark-server")
    work = os.path.join(args.work_dir, "quantize-cli")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src = os.path.join(work, "tiny-bf16")
    run([make, "--preset", "tiny", "--seed", "9", "-o", src])
    prompt = ",".join(str(14 + (i * 37) % 1000) for i in range(45))  # longer than the window (32)

    for fmt in ("int8", "w4a8", "w4a16"):
        out = os.path.join(work, f"tiny-{fmt}")
        proc = run([quantize, "-m", src, "-o", out, "-f", fmt, "-t", "2"])
        if "verified:" not in proc.stdout:
            sys.exit(f"FAIL: {fmt}: no verification line:\n{proc.stdout}")
        cfg = json.load(open(os.path.join(out, "config.json")))
        assert cfg["quantization_config"]["format"] == fmt, cfg["quantization_config"]
        gen = [server, "generate", "--prompt-ids", prompt, "-n", "8", "--top", "3", "--json", "-t", "2"]
        logits_a, logits_b = os.path.join(work, f"{fmt}-at-load.npy"), os.path.join(work, f"{fmt}-stored.npy")
        at_load = json.loads(run(gen + ["--model", src, "--quant", fmt, "--logits-out", logits_a]).stdout)
        stored = json.loads(run(gen + ["--model", out, "--logits-out", logits_b]).stdout)
        for timing in ("prefill_s", "decode_s"):
            at_load.pop(timing, None)
            stored.pop(timing, None)
        if open(logits_a, "rb").read() != open(logits_b, "rb").read():
            sys.exit(f"FAIL: {fmt}: the written checkpoint's logits differ from quantize-at-load's")
        if at_load != stored:
            sys.exit(f"FAIL: {fmt}: the written checkpoint generates differently from quantize-at-load\n"
                     f"{at_load}\n{stored}")
        print(f"ok {fmt}: written checkpoint == quantize-at-load (every logit bit-identical, {len(stored['generated_ids'])} tokens)")

        # A pre-quantized checkpoint cannot be converted to another format at load.
        other = "int8" if fmt != "int8" else "w4a16"
        expect_one_error_line(run(gen + ["--model", out, "--quant", other], expect_rc=1), "pre-quantized")

    # Mistakes: an output folder in use, a float target, a pre-quantized source.
    busy = os.path.join(work, "busy")
    os.makedirs(busy)
    open(os.path.join(busy, "keep.txt"), "w").write("user data")
    expect_one_error_line(run([quantize, "-m", src, "-o", busy, "-f", "int8"], expect_rc=1), "not an empty folder")
    assert os.listdir(busy) == ["keep.txt"], os.listdir(busy)
    expect_one_error_line(run([quantize, "-m", src, "-o", os.path.join(work, "f"), "-f", "f32"], expect_rc=1),
                          "not f32")
    expect_one_error_line(run([quantize, "-m", os.path.join(work, "tiny-int8"), "-o", os.path.join(work, "again"),
                               "-f", "int8"], expect_rc=1), "pre-quantized")
    expect_one_error_line(run([quantize, "-m", os.path.join(work, "nowhere"), "-o", os.path.join(work, "x"),
                               "-f", "int8"], expect_rc=1), "nowhere")
    leftovers = [n for n in os.listdir(work) if ".partial" in n]
    assert not leftovers, leftovers

    # The fidelity report: one summary row per format, one per-tensor row per linear weight.
    proc = run([quantize, "-m", src, "--report", "-f", "bf16,int8,w4a8,w4a16", "-t", "2"])
    text = proc.stdout
    print(text)
    summary = {}
    for line in text.splitlines():
        m = re.match(r"\| (bf16|int8|w4a8|w4a16) \| ([\d.]+) \| ([\d.]+) \| (\S+) \| (\S+) \| (\S+) \| (\d+)/(\d+) .*\| (\d+)/(\d+) \|$", line)
        if m:
            summary[m.group(1)] = m.groups()
    assert set(summary) == {"bf16", "int8", "w4a8", "w4a16"}, text
    assert summary["bf16"][3] == "exact" and summary["bf16"][4] == "exact", summary["bf16"]  # bf16 source
    for fmt in ("int8", "w4a8", "w4a16"):
        snr = float(summary[fmt][5])
        assert 0 < snr < 80, (fmt, snr)  # random tiny weights: errors compound over 8 layers
        assert int(summary[fmt][7]) == 32 + 64, summary[fmt]  # window + 64 prompt positions
    assert float(summary["int8"][5]) > float(summary["w4a8"][5]), summary
    tensor_rows = [l for l in text.splitlines() if l.startswith("| model.")]
    layers = json.load(open(os.path.join(src, "config.json")))["num_hidden_layers"]
    assert len(tensor_rows) == 1 + 5 * layers, len(tensor_rows)
    print("ok report")


if __name__ == "__main__":
    main()
