#!/usr/bin/env python3
"""spark-bench --profile on a tiny generated checkpoint: after each tgN row (and its @ dN row), a table of
where a decode step's time goes, with every stage of the model once per layer (the residual adds twice),
the timed repetitions' steps counted, shares adding up to the whole step, and a read rate for exactly the
projections. With -o json the tables go to stderr and stdout stays one JSON document; with md they follow
the rows on stdout. With --concurrency, one more table per concurrency count: the engine's steps over the
timed repetition."""
import json
import os
import re
import subprocess
import sys

from bench_common import tiny_checkpoint

LAYERS = 8  # the tiny preset's num_hidden_layers
SECTIONS = [  # (label, calls per step, reads projection weights)
    ("embedding lookup, step start", 1, False),
    ("input RMSNorm", LAYERS, False),
    ("q_k_v_proj", LAYERS, True),
    ("g_proj, sigmoid", LAYERS, False),
    ("RoPE", LAYERS, False),
    ("KV store, attention, head gate", LAYERS, False),
    ("out_proj", LAYERS, True),
    ("residual adds", 2 * LAYERS, False),
    ("post-attention RMSNorm", LAYERS, False),
    ("gate_proj, up_proj", LAYERS, True),
    ("GEGLU", LAYERS, False),
    ("down_proj", LAYERS, True),
    ("final RMSNorm", 1, False),
    ("lm_head", 1, True),
]


def tables(text):
    """{title: (steps, [(label, calls, us, share, rate)], whole_us)} for each profile table in text."""
    found = {}
    for m in re.finditer(r"^(?:decode|engine) step profile: (.+) \((\d+) steps\)\n\n((?:\|.*\n)+)", text, re.M):
        rows, whole = [], None
        for line in m.group(3).splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] == "whole step":
                whole = float(cells[2])
                continue
            rows.append((cells[0], float(cells[1]), float(cells[2]), float(cells[3].rstrip("%")),
                         float(cells[4]) if cells[4] else None))
        found[m.group(1)] = (int(m.group(2)), rows, whole)
    return found


def main():
    args, model = tiny_checkpoint("bench-profile-tiny", 9)
    bench = [os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "2", "-p", "0", "-n", "6", "-r", "2",
             "-d", "20", "--profile"]
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    out = subprocess.run(bench + ["-o", "json"], check=True, capture_output=True, text=True)
    rows = json.loads(out.stdout)
    check([r["test"] for r in rows] == ["tg6", "tg6 @ d20"], f"json rows: {[r['test'] for r in rows]}")
    found = tables(out.stderr)
    # Titles name the row, the kernels (the tier's) and the threads.
    check(len(found) == 2 and all(t.startswith("tg6, ") for t in found)
          and sorted(t.endswith(", 2 threads @ d20") for t in found) == [False, True]
          and all(t.split(" @ ")[0].endswith(", 2 threads") for t in found), f"profile tables on stderr: {sorted(found)}")
    for title, (steps, sections, whole) in found.items():
        check(steps == 2 * 6, f"{title}: {steps} steps, expected the 2 timed repetitions x 6 tokens")
        check([s[0] for s in sections] == [s[0] for s in SECTIONS], f"{title}: sections {[s[0] for s in sections]}")
        for (label, calls, us, share, rate), (_, want_calls, reads) in zip(sections, SECTIONS):
            check(calls == want_calls, f"{title}: {label} {calls} calls per step, expected {want_calls}")
            check(us >= 0 and 0 <= share <= 100, f"{title}: {label} {us} us, {share}%")
            check((rate is not None and rate > 0) == reads, f"{title}: {label} read rate {rate}")
        total = sum(s[2] for s in sections)
        check(whole is not None and abs(total - whole) <= 0.01 * whole + 0.1 * len(sections),
              f"{title}: sections add up to {total} us, whole step {whole}")
        check(abs(sum(s[3] for s in sections) - 100) <= 0.1 * len(sections), f"{title}: shares")
        # The same steps as the row's repetitions: their mean step lies between the fastest and the slowest
        # repetition's at any load (the slack: what each run does after its last tap); a lap charged from
        # the wrong start is off by far more.
        row = next(r for r in rows if (r["test"] == "tg6 @ d20") == title.endswith("@ d20"))
        fastest, slowest = 1e6 / row["tokens_per_s_max"], 1e6 / row["tokens_per_s_min"]
        check(whole is not None and 0.8 * fastest <= whole <= 1.25 * slowest,
              f"{title}: whole step {whole} us, repetitions {fastest:.1f}-{slowest:.1f} us a step")

    # The engine's steps: 3 sequences of 8 prompt tokens and 4 new ones, one timed repetition. Every step
    # computes logits (the prompts fit one step), so every section runs once a step as in decode.
    conc = [os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "2", "-p", "0", "-n", "0", "-r", "1",
            "--concurrency", "3", "--conc-prompt", "8", "--conc-gen", "4", "--profile", "-o", "json"]
    out = subprocess.run(conc, check=True, capture_output=True, text=True)
    check([r["test"] for r in json.loads(out.stdout)] == ["conc3"], "conc json rows")
    found = tables(out.stderr)
    title = next(iter(found), "")
    check(len(found) == 1 and title.startswith("conc3, ") and "8-token prompts and 4 new tokens" in title,
          f"engine profile tables: {sorted(found)}")
    for steps, sections, whole in found.values():
        # At least the prefill step and 3 decode steps; at most one step a token (no batching at all).
        check(4 <= steps <= 3 * 4, f"engine profile: {steps} steps")
        check([s[0] for s in sections] == [s[0] for s in SECTIONS], f"engine profile: sections {sections}")
        for (label, calls, us, share, rate), (_, want_calls, reads) in zip(sections, SECTIONS):
            check(calls == want_calls, f"engine profile: {label} {calls} calls per step, expected {want_calls}")
            check((rate is not None and rate > 0) == reads, f"engine profile: {label} read rate {rate}")
        check(abs(sum(s[3] for s in sections) - 100) <= 0.1 * len(sections), "engine profile: shares")

    md = subprocess.run(bench, check=True, capture_output=True, text=True)
    check(len(tables(md.stdout)) == 2, "md: the two profile tables on stdout")
    check(md.stdout.index("| tg6 @ d20 |") < md.stdout.index("decode step profile"), "md: tables after the rows")

    if failures:
        print("\n".join(failures))
        print(out.stderr)
        sys.exit(1)
    print("bench --profile: 2 decode tables and 1 engine table, sections and calls per step as expected")


if __name__ == "__main__":
    main()
