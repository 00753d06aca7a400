#!/usr/bin/python3
"""`spark-server grammar-check` end to end: the MaskBench protocol runner the structured-output figures come from.

1. Hand-written cases (tests/golden/grammar_check_cases.jsonl) on the demo tokenizer: every test text's
   verdict (accepted as complete or not) must be its label, the two malformed schemas must be refusals that
   name the keyword, every compiled case must report its peak work and memory, and the summary table must
   count what the lines say.
2. Bad input: a line that is not JSON, a missing file: one-line error, non-zero exit.
3. The 338 MaskBench cases of ../shared/grammar/json-schema-cases.jsonl, when that file is present (it is not
   part of a user's clone): no invalid text accepted, and no fewer cases compiled (321) or passing (314) than
   bench/GRAMMAR.md records. Said plainly when the file is absent.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# bench/GRAMMAR.md: 321 of the 338 MaskBench cases compile and 314 pass, with 0 invalid texts accepted.
MASKBENCH_COMPILED, MASKBENCH_PASSING = 321, 314


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)


def summary_counts(stderr):
    """(cases, compiled, passing, validation errors, invalidation errors, tests) from the summary table."""
    m = re.search(r"^\| (\d+) \| (\d+) \([\d.]+%\) \| (\d+) \([\d.]+%\) \| (\d+) \| (\d+) \| (\d+) \|$", stderr, re.M)
    return tuple(int(g) for g in m.groups()) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--make-checkpoint", required=True)
    ap.add_argument("--shared-dir", default=os.path.join(REPO, "..", "shared"))
    args = ap.parse_args()
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as work:
        tok = os.path.join(work, "tok")
        made = run([args.make_checkpoint, "--preset", "demo", "--tokenizer-only", "-o", tok])
        if made.returncode != 0:
            print(made.stderr)
            return 1

        cases_path = os.path.join(HERE, "grammar_check_cases.jsonl")
        with open(cases_path) as f:
            cases = [json.loads(line) for line in f if line.strip()]
        res = run([args.server, "grammar-check", "--summary", "--tokenizer", tok, cases_path])
        check(res.returncode == 0, f"grammar-check on {len(cases)} hand-written cases exits 0 ({res.returncode})")
        lines = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
        check(len(lines) == len(cases), f"one output line per case ({len(lines)} of {len(cases)})")
        passing = compiled = tests = valid_refused = invalid_accepted = 0
        for case, out in zip(cases, lines):
            cid = case["id"]
            check(out.get("id") == cid, f"{cid}: the line carries the case's id")
            if cid.startswith("refused-"):
                err = out.get("compile_error", "")
                check(err != "" and ("required" in err or "type" in err),
                      f"{cid}: refused, naming the keyword ({err!r})")
                continue
            check("compile_error" not in out, f"{cid}: compiles ({out.get('compile_error', '')})")
            compiled += 1
            check(out.get("peak_work", -1) >= 0 and out.get("memory_bytes", 0) > 0,
                  f"{cid}: reports peak work ({out.get('peak_work')}) and memory ({out.get('memory_bytes')} bytes)")
            ok_case = True
            for t, r in zip(case["tests"], out.get("tests", [])):
                tests += 1
                verdict = r["complete"]
                ok_case &= verdict == t["valid"]
                valid_refused += t["valid"] and not verdict
                invalid_accepted += verdict and not t["valid"]
                check(verdict == t["valid"], f"{cid}: {t['text']!r} {'accepted' if verdict else 'refused'}"
                      f" (labelled {'valid' if t['valid'] else 'invalid'})")
                check(len(r["mask_us"]) == r["tokens"] or not r["accepted"],
                      f"{cid}: one mask timed per token of an accepted text")
            check(len(out.get("tests", [])) == len(case["tests"]), f"{cid}: a result per test text")
            passing += ok_case
        want = (len(cases), compiled, passing, valid_refused, invalid_accepted, tests)
        got = summary_counts(res.stderr)
        check(got == want, f"summary table {got} counts what the lines say {want}")

        bad = os.path.join(work, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"id": "fine", "schema": {"type": "integer"}, "tests": []}\nnot json\n')
        res = run([args.server, "grammar-check", "--tokenizer", tok, bad])
        err = res.stderr.strip()
        check(res.returncode != 0 and len(err.splitlines()) == 1 and ":2: not JSON" in err,
              f"a line that is not JSON: exit {res.returncode}, one line naming it ({err[:80]!r})")
        res = run([args.server, "grammar-check", "--tokenizer", tok, os.path.join(work, "missing.jsonl")])
        err = res.stderr.strip()
        check(res.returncode != 0 and len(err.splitlines()) == 1 and "cannot read" in err,
              f"a missing file: exit {res.returncode}, one line ({err!r})")

        shared = os.path.join(args.shared_dir, "grammar", "json-schema-cases.jsonl")
        if os.path.exists(shared):
            res = run([args.server, "grammar-check", "--summary", "--tokenizer", tok, shared])
            got = summary_counts(res.stderr)
            check(res.returncode == 0 and got is not None, f"MaskBench ({shared}): runs to the end")
            if got is not None:
                n, comp, passed, _, invalid_accepted, n_tests = got
                print(f"MaskBench on the demo tokenizer: {n} cases, {comp} compiled, {passed} passing, "
                      f"{invalid_accepted} invalid accepted, {n_tests} tests")
                check(invalid_accepted == 0, "MaskBench: no invalid text accepted")
                check(comp >= MASKBENCH_COMPILED and passed >= MASKBENCH_PASSING,
                      f"MaskBench: at least {MASKBENCH_COMPILED} compiled and {MASKBENCH_PASSING} passing")
        else:
            print(f"MaskBench part NOT RUN: {shared} is not present (it sits beside the repository in CI and "
                  f"on the developers' machines, not in a user's clone)")

    print(f"{'FAILED: ' + str(len(failures)) if failures else 'all passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
