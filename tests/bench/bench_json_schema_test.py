#!/usr/bin/env python3
"""spark-bench --json-schema on a tiny generated checkpoint: a constrained-vs-free line per concurrency, and
every constrained text (written by --schema-texts) parses as JSON and is valid for the schema, checked here
independently of the engine's own validator."""
import json
import os
import re
import subprocess
import sys

from bench_common import tiny_checkpoint

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}


def valid(v):
    return (isinstance(v, dict) and list(v) == ["name", "age", "tags"] and isinstance(v["name"], str)
            and len(v["name"]) <= 20 and isinstance(v["age"], int) and not isinstance(v["age"], bool)
            and 0 <= v["age"] <= 120 and isinstance(v["tags"], list) and len(v["tags"]) <= 3
            and all(isinstance(t, str) for t in v["tags"]))


def main():
    args, model = tiny_checkpoint("bench-schema-tiny", 7)
    schema = os.path.join(args.work_dir, "person.schema.json")
    with open(schema, "w") as f:
        json.dump(SCHEMA, f)
    texts = os.path.join(args.work_dir, "schema-texts.jsonl")
    out = subprocess.run([os.path.join(args.bin_dir, "spark-bench"), "-m", model, "-t", "1", "-p", "0", "-n", "0",
                          "-r", "2", "--concurrency", "1,3", "--conc-prompt", "8", "--conc-gen", "48",
                          "--temperature", "1", "--json-schema", schema, "--schema-texts", texts],
                         capture_output=True, text=True)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
    check(out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}")
    for n in (1, 3):
        m = re.search(rf"^conc{n} t=1: json-schema ([0-9.]+) t/s vs free ([0-9.]+) t/s = ([0-9.]+)% \[[0-9.]+-[0-9.]+%\] "
                      rf"\(median \[min-max\] of 2 paired repetitions; "
                      rf"[0-9.]+ tokens per constrained sequence, (\d+)/(\d+) texts valid\)$", out.stdout, re.M)
        check(m is not None, f"no constrained-vs-free line for conc{n} in:\n{out.stdout}")
        if m:
            check(float(m.group(1)) > 0 and float(m.group(2)) > 0, f"conc{n}: rates {m.group(0)}")
            check(m.group(4) == m.group(5) and int(m.group(5)) == 3 * n, f"conc{n}: {m.group(0)}")
    rows = []
    if os.path.exists(texts):
        with open(texts) as f:
            rows = [json.loads(line) for line in f]
    # Warm-up plus 2 repetitions, n texts each, for n = 1 and 3.
    check(len(rows) == 3 * 1 + 3 * 3, f"expected 12 texts, got {len(rows)}")
    for r in rows:
        try:
            v = json.loads(r["text"])
        except ValueError:
            v = None
        check(v is not None and valid(v), f"not valid for the schema: {r['text']!r}")
        check(r["valid"] is True, f"engine-side check disagrees: {r}")
    for f in failures:
        print("FAIL:", f)
    print(f"{1 if not failures else 0} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
