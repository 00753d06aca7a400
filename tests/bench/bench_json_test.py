#!/usr/bin/env python3
"""spark-bench on a tiny generated checkpoint: `-r 2 -o json` must print one JSON array whose rows carry
every documented field with sane values, for prefill, decode and concurrency rows, and --plot must write
an SVG."""
import csv
import io
import json
import os
import re
import subprocess
import sys

from bench_common import tiny_checkpoint

FIELDS = {
    "test": str, "quant": str, "kernel_path": str, "threads": int, "n_prompt": int, "n_gen": int,
    "concurrency": int, "tokens_per_s_median": float, "tokens_per_s_min": float, "tokens_per_s_max": float,
    "load_s": float, "rss_anon_settled_bytes": int, "rss_anon_peak_bytes": int, "kv_bytes": int, "commit": str,
}

def main():
    args, model = tiny_checkpoint("bench-tiny", 5)
    svg = os.path.join(args.work_dir, "bench.svg")
    out = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "1,2", "-p", "48", "-n", "8",
                          "-r", "2", "--concurrency", "1,3", "--conc-prompt", "20", "--conc-gen", "6", "-o", "json",
                          "--plot", svg], check=True, capture_output=True, text=True)
    rows = json.loads(out.stdout)
    failures = []
    def check(cond, what):
        if not cond:
            failures.append(what)
    check(isinstance(rows, list) and len(rows) == 8, f"expected 8 rows (2 threads x pp, tg, conc1, conc3), got {len(rows)}")
    tests = sorted({(r["test"], r["threads"]) for r in rows})
    check(tests == sorted((t, th) for t in ("pp48", "tg8", "conc1", "conc3") for th in (1, 2)), f"rows: {tests}")
    for r in rows:
        for key, typ in FIELDS.items():
            check(key in r, f"{r.get('test')}: missing {key}")
            if key in r:
                ok = isinstance(r[key], (int, float)) if typ is float else isinstance(r[key], typ)
                check(ok, f"{r.get('test')}: {key} has type {type(r[key]).__name__}")
        check(set(r) >= set(FIELDS), f"{r['test']}: fields {sorted(r)}")
        check(0 < r["tokens_per_s_min"] <= r["tokens_per_s_median"] <= r["tokens_per_s_max"], f"{r['test']}: min/median/max order")
        check(r["load_s"] > 0, f"{r['test']}: load_s")
        check(r["rss_anon_settled_bytes"] > 0 and r["rss_anon_peak_bytes"] >= r["rss_anon_settled_bytes"],
              f"{r['test']}: rss settled {r['rss_anon_settled_bytes']} peak {r['rss_anon_peak_bytes']}")
        check(r["kv_bytes"] > 0, f"{r['test']}: kv_bytes")
        check(r["quant"] == "bf16", f"{r['test']}: quant {r['quant']}")
        check(len(r["commit"]) >= 7, f"{r['test']}: commit {r['commit']}")
        if r["test"].startswith("pp"):
            check(r["n_prompt"] == 48 and r["n_gen"] == 0 and r["concurrency"] == 1, f"{r['test']}: sizes")
        elif r["test"].startswith("tg"):
            check(r["n_prompt"] == 0 and r["n_gen"] == 8 and r["concurrency"] == 1, f"{r['test']}: sizes")
        else:
            check(r["n_prompt"] == 20 and r["n_gen"] == 6 and r["concurrency"] == int(r["test"][4:]), f"{r['test']}: sizes")
    with open(svg) as f:
        text = f.read()
    check(text.startswith("<svg") and "polyline" in text and "concurrent sequences" in text, "plot SVG")
    # Sampling settings reach the --concurrency runs and name them (penalties, bias and logprobs apply to
    # greedy decoding too).
    for flags, name in (
        (["--temperature", "0.8", "--top-p", "0.9", "--top-k", "50", "--min-p", "0.05", "--presence-penalty", "0.5",
          "--frequency-penalty", "0.25", "--repetition-penalty", "1.1", "--logit-bias", "4", "--logprobs", "2"],
         "conc2 T=0.8 top_p=0.9 top_k=50 min_p=0.05 presence=0.5 frequency=0.25 repetition=1.1 logit_bias=4 logprobs=2"),
        (["--logprobs", "0"], "conc2 logprobs=0"),
    ):
        out = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "1", "-p", "0", "-n", "0",
                              "-r", "1", "--concurrency", "2", "--conc-prompt", "8", "--conc-gen", "4", "-o", "json"]
                             + flags, check=True, capture_output=True, text=True)
        sampled = json.loads(out.stdout)
        check([r["test"] for r in sampled] == [name], f"sampling rows: {[r['test'] for r in sampled]}")
        check(all(r["tokens_per_s_median"] > 0 for r in sampled), "sampling rows: tokens/s")
    # --vs-greedy: greedy and the setting alternate in one process, a row each, and a comparison line (on
    # stderr with -o json) whose two rates are the rows' medians and whose ratio range holds its median.
    for flags, names in (
        (["--temperature", "0.8", "--top-p", "0.9"], ["conc2 greedy", "conc2 T=0.8 top_p=0.9"]),
        ([], ["conc2 greedy", "conc2 greedy again"]),
    ):
        out = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "1", "-p", "0", "-n", "0",
                              "-r", "3", "--concurrency", "2", "--conc-prompt", "8", "--conc-gen", "4", "-o", "json",
                              "--vs-greedy"] + flags, check=True, capture_output=True, text=True)
        paired = json.loads(out.stdout)
        check([r["test"] for r in paired] == names, f"--vs-greedy rows: {[r['test'] for r in paired]}")
        m = re.search(r"^conc2 t=1: (.+) ([0-9.]+) t/s vs greedy ([0-9.]+) t/s = ([0-9.]+)% \[([0-9.]+)-([0-9.]+)%\] "
                      r"\(median \[min-max\] of 3 paired repetitions; sampling ([0-9.]+)% of step time vs ([0-9.]+)%\)$", out.stderr, re.M)
        check(m is not None, f"--vs-greedy: no comparison line in:\n{out.stderr}")
        if m and len(paired) == 2:
            check(" " + m.group(1) == names[1][len("conc2"):], f"--vs-greedy line names {m.group(1)!r}")
            check(abs(float(m.group(2)) - paired[1]["tokens_per_s_median"]) < 0.01 and
                  abs(float(m.group(3)) - paired[0]["tokens_per_s_median"]) < 0.01, f"--vs-greedy rates: {m.group(0)}")
            check(0 < float(m.group(5)) <= float(m.group(4)) <= float(m.group(6)), f"--vs-greedy ratios: {m.group(0)}")
            check(0 < float(m.group(7)) < 100 and 0 < float(m.group(8)) < 100, f"--vs-greedy sampling: {m.group(0)}")
    # --of-ceiling: the ceilings are measured around the runs and each pp / tg row carries its fraction of its own (the
    # prefill peak of the format's instructions, the read bandwidth over the weight bytes); concurrency rows
    # mix both and carry none. The markdown table gains the two columns.
    out = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "1", "-p", "16", "-n", "4",
                          "-r", "1", "--concurrency", "2", "--conc-prompt", "8", "--conc-gen", "4", "-o", "json",
                          "--of-ceiling"], check=True, capture_output=True, text=True)
    ceiling_rows = {r["test"]: r for r in json.loads(out.stdout)}
    check(sorted(ceiling_rows) == ["conc2", "pp16", "tg4"], f"--of-ceiling rows: {sorted(ceiling_rows)}")
    for test, basis in (("pp16", r"^(f32 FMA|bf16 dot|int8 dot|AMX int8|AMX bf16) [0-9]+ G/s$"), ("tg4", r"^read [0-9]+ GB/s$")):
        r = ceiling_rows.get(test, {})
        check(r.get("ceiling_tokens_per_s", 0) > 0 and re.match(basis, r.get("ceiling_basis", "")) is not None,
              f"--of-ceiling {test}: {r}")
        if r.get("ceiling_tokens_per_s", 0) > 0:
            check(abs(r["of_ceiling"] - r["tokens_per_s_median"] / r["ceiling_tokens_per_s"]) < 1e-9,
                  f"--of-ceiling {test}: of_ceiling {r['of_ceiling']}")
    # Measured before the runs and after the format's; the row is held to the higher (a measurement on a busy
    # host comes out low).
    reads = [float(v) for v in re.findall(r"ceilings at 1 threads(?: after \S+)?: read ([0-9.]+) GB/s", out.stderr)]
    check(len(reads) == 2 and ceiling_rows.get("tg4", {}).get("ceiling_basis") == f"read {int(max(reads) + 0.5)} GB/s",
          f"--of-ceiling: tg4 {ceiling_rows.get('tg4', {}).get('ceiling_basis')} against the measurements {reads}")
    check("ceiling_tokens_per_s" not in ceiling_rows.get("conc2", {"ceiling_tokens_per_s": 1}),
          f"--of-ceiling conc2: {ceiling_rows.get('conc2')}")
    base = [os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "1", "-p", "16", "-n", "4", "-r", "1",
            "--concurrency", "2", "--conc-prompt", "8", "--conc-gen", "4", "--of-ceiling"]
    md = subprocess.run(base, check=True, capture_output=True, text=True).stdout
    table = [line for line in md.splitlines() if line.startswith("|")]
    check(len(table) == 5 and table[0].endswith("| ceiling t/s | of ceiling |") and
          all(line.count("|") == table[0].count("|") for line in table), f"--of-ceiling markdown:\n{md}")
    check(re.search(r"\| tg4 \|.*\| [0-9.]+ \(read [0-9]+ GB/s\) \| [0-9]+% \|$", md, re.M) is not None and
          re.search(r"\| conc2 \|.*\| \| \|$", md, re.M) is not None, f"--of-ceiling markdown:\n{md}")
    # CSV, with a kernel path that holds a comma (", KV bf16"): quoted, so every line has the header's fields.
    text = subprocess.run(base + ["-o", "csv", "--kv-cache-dtype", "bf16"], check=True, capture_output=True,
                          text=True).stdout
    table = list(csv.reader(io.StringIO(text)))
    header = table[0] if table else []
    check(header[-2:] == ["ceiling_tokens_per_s", "of_ceiling"] and len(table) == 4 and
          all(len(row) == len(header) for row in table), f"--of-ceiling csv: {text}")
    by_test = {row[0]: dict(zip(header, row)) for row in table[1:]}
    check(by_test.get("conc2", {}).get("of_ceiling") == "" and float(by_test.get("tg4", {}).get("of_ceiling") or 0) > 0
          and by_test.get("tg4", {}).get("kernel_path", "").endswith(", KV bf16"), f"--of-ceiling csv rows: {by_test}")
    bad = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-p", "0", "-n", "0", "--vs-greedy"],
                         capture_output=True, text=True)
    check(bad.returncode != 0 and "--concurrency" in bad.stderr, f"--vs-greedy without --concurrency: {bad.stderr}")
    # A load that fails is one error line and status 1 (it was std::terminate: the RssAnon sampler thread
    # was still running when the error left).
    for load in (["-m", os.path.join(args.work_dir, "no-such-folder")], ["--random-weights", "no-such-shape"]):
        bad = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), *load, "-p", "4", "-n", "1", "-r", "1"],
                             capture_output=True, text=True)
        lines = bad.stderr.strip().splitlines()
        check(bad.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "),
              f"spark-bench {' '.join(load)}: status {bad.returncode}, stderr {bad.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{1 if not failures else 0} passed, {1 if failures else 0} failed")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
