#!/usr/bin/env python3
"""spark-bench --shared-prefix on a tiny generated checkpoint: the sessions that arrive together compute the
shared prefix once (the rest is served from the cache), every session counts its prompt, and the per-repetition
engine / (a) ratio is reported from as many repetitions as were asked for."""
import os
import re
import subprocess
import sys

from bench_common import tiny_checkpoint


def table_rows(text, header_start):
    """Cells of the markdown table whose header line starts with header_start."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_start):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip("|").split("|")])
            return rows
    return None


def main():
    args, model = tiny_checkpoint("bench-tiny", 5)
    # Prefix 96 = 6 blocks of 16, 3x the tiny preset's sliding window; 32 own tokens per session.
    reps = 3
    out = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "2", "-p", "0", "-n", "0",
                          "-r", str(reps), "--shared-prefix", "96", "--session-tokens", "32", "--sessions", "1,3"],
                         check=True, capture_output=True, text=True).stdout
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    shared = table_rows(out, "| quant | threads | sessions |")
    check(shared is not None and len(shared) == 2, f"shared-prefix table: {shared}")
    if shared and len(shared) == 2:
        by_sessions = {int(r[2]): r for r in shared}
        # One session alone computes everything; of three arriving together, one computes the prefix and
        # all three their own 32 tokens: 96 + 3 x 32 of 3 x 128, the other two reuse 96 each.
        check(by_sessions.get(1, [""] * 9)[7:9] == ["128 / 128", "0"], f"1 session: {by_sessions.get(1)}")
        check(by_sessions.get(3, [""] * 9)[7:9] == ["192 / 384", "192"], f"3 sessions: {by_sessions.get(3)}")

    own = table_rows(out, "| threads | (a) in place (s) |")
    check(own is not None and len(own) == 1, f"own-tokens table: {own}")
    if own and len(own) == 1:
        m = re.fullmatch(r"([0-9.]+) \[([0-9.]+)-([0-9.]+)\]", own[0][7])
        check(m is not None, f"same-repetition ratio cell: {own[0][7]!r}")
        if m:
            med, lo, hi = (float(x) for x in m.groups())
            check(0 < lo <= med <= hi, f"ratio median {med} outside [{lo}, {hi}]")
    check(f"(a): {reps} samples, (b) and (c): {3 * reps} samples" in out, "sample counts line")

    if failures:
        print(out)
        for f in failures:
            print("FAIL:", f)
        return 1
    print(f"shared-prefix bench: ok ({reps} repetitions, prefix computed once for 3 sessions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
