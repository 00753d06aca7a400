#!/usr/bin/env python3
"""Parity of spark-server's C++ chat-template engine with Python's jinja2 as Hugging Face configures it.

Every case is rendered by spark-chat-render (one process per suite) and by jinja2 in this process, and must
give byte-identical text, or an error on both sides (with the same message when the template called
raise_exception). Suites:

  features        small templates, one engine feature each (chat_template_cases.py)
  fuzz            random templates from a small grammar (chat_template_fuzz.py), fixed seed
  spark           Spark's real template from ../shared/spark/chat_template.jinja: generated conversations
                  plus the template's raise_exception cases (skipped, with a message, when the file is absent)
  spark-default   our own template (src/chat/spark_chat_template.jinja) against jinja2, and against the real
                  template's output on the same conversations when the real template is present
  qwen3, llama3   real public templates from tests/golden/fixtures/
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from chat_template_cases import CONTEXT, feature_cases  # noqa: E402
from chat_template_conversations import (  # noqa: E402
    llama3_conversations,
    qwen3_conversations,
    spark_conversations,
    spark_error_conversations,
)
from chat_template_fuzz import fuzz_cases  # noqa: E402
from chat_template_reference import Reference  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_TEMPLATE = os.path.join(REPO, "src", "chat", "spark_chat_template.jinja")
FIXTURES = os.path.join(HERE, "fixtures")


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def run_renderer(renderer, cases, template_path=None):
    cmd = [renderer] + (["--template", template_path] if template_path else [])
    payload = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    proc = subprocess.run(cmd, input=payload.encode("utf-8"), capture_output=True, timeout=600)
    if proc.returncode != 0:
        sys.exit("spark-chat-render exited with %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")))
    # Not splitlines(): U+2028 and friends appear unescaped inside the JSON strings.
    lines = proc.stdout.decode("utf-8").split("\n")[:-1]
    if len(lines) != len(cases):
        sys.exit("spark-chat-render answered %d of %d cases" % (len(lines), len(cases)))
    return [json.loads(line) for line in lines]


def first_difference(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return "at char %d: ours %r / jinja2 %r" % (i, a[max(0, i - 30):i + 40], b[max(0, i - 30):i + 40])


class Suite:
    def __init__(self, name):
        self.name = name
        self.identical = 0
        self.both_failed = 0
        self.skipped = 0
        self.failures = []

    def check(self, case, ours, ref):
        name = case.get("name", "?")
        if ref["ok"] and " object at 0x" in ref["text"]:
            # Python printed an object's address (a generator, a bound method): nothing to compare.
            self.skipped += 1
            return
        expect = case.get("expect", "any")
        if expect != "any" and ref["ok"]:
            self.failures.append("%s: expected an error but jinja2 rendered %r" % (name, ref["text"][:200]))
        elif ours["ok"] and ref["ok"]:
            if ours["text"] == ref["text"]:
                self.identical += 1
            else:
                self.failures.append("%s: text differs %s" % (name, first_difference(ours["text"], ref["text"])))
        elif not ours["ok"] and not ref["ok"]:
            if ref["kind"] == "raised" and (ours["kind"] != "raised" or ours["detail"] != ref["detail"]):
                self.failures.append("%s: raise_exception message differs: ours %s %r / jinja2 %r"
                                     % (name, ours["kind"], ours["detail"], ref["detail"]))
            elif expect == "syntax" and ref["kind"] == "syntax" and ours["kind"] != "syntax":
                self.failures.append("%s: jinja2 reports a syntax error, ours a %s error: %s"
                                     % (name, ours["kind"], ours["detail"]))
            else:
                self.both_failed += 1
        elif ours["ok"]:
            self.failures.append("%s: jinja2 failed (%s: %s) but ours rendered %r"
                                 % (name, ref["kind"], ref["detail"], ours["text"][:200]))
        else:
            self.failures.append("%s: ours failed (%s: %s) but jinja2 rendered %r"
                                 % (name, ours["kind"], ours["detail"], ref["text"][:200]))

    def require_identical(self, minimum):
        if self.identical < minimum:
            self.failures.append("only %d conversations rendered identically; the test needs at least %d"
                                 % (self.identical, minimum))

    def report(self):
        status = "ok" if not self.failures else "FAILED"
        skipped = ", %d skipped (Python printed an address)" % self.skipped if self.skipped else ""
        print("[%s] %s: %d identical, %d failing on both sides, %d mismatches%s"
              % (status, self.name, self.identical, self.both_failed, len(self.failures), skipped))
        for f in self.failures[:20]:
            print("    " + f)
        if len(self.failures) > 20:
            print("    ... %d more" % (len(self.failures) - 20))
        return not self.failures


def compare(suite, cases, ours, reference, file_template=None, default_template=None):
    for case, result in zip(cases, ours):
        suite.check(case, result, reference.render(case, file_template, default_template))
    return suite


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--renderer", required=True, help="path to spark-chat-render")
    parser.add_argument("--shared-dir", default=os.path.join(REPO, "..", "shared"))
    args = parser.parse_args()

    reference = Reference()
    default_text = read(DEFAULT_TEMPLATE)
    suites = []

    cases = feature_cases()
    suites.append(compare(Suite("features"), cases, run_renderer(args.renderer, cases), reference))

    cases = fuzz_cases(seed=11, count=3000, context=CONTEXT)
    suite = compare(Suite("fuzz"), cases, run_renderer(args.renderer, cases), reference)
    suite.require_identical(2000)
    suites.append(suite)

    conversations = spark_conversations(seed=20261130, count=240)
    errors = spark_error_conversations(seed=7)
    spark_cases = conversations + errors

    # Our template against jinja2 rendering the same template text.
    default_cases = [dict(c, default_template=True) for c in spark_cases]
    default_results = run_renderer(args.renderer, default_cases)
    suite = compare(Suite("spark-default (ours) vs jinja2"), default_cases, default_results, reference,
                    default_template=default_text)
    suite.require_identical(200)
    suites.append(suite)

    real_path = os.path.join(args.shared_dir, "spark", "chat_template.jinja")
    if os.path.exists(real_path):
        real_text = read(real_path)
        real_results = run_renderer(args.renderer, spark_cases, real_path)
        suite = compare(Suite("spark (shared real template) vs jinja2"), spark_cases, real_results, reference,
                        file_template=real_text)
        suite.require_identical(200)
        suites.append(suite)

        # Our template must produce exactly what the real one produces, and fail where it fails.
        same = Suite("spark-default (ours) vs real template")
        for case, ours, real in zip(spark_cases, default_results, real_results):
            same.check(dict(case, expect="any"), ours, real if real["ok"] else dict(real, kind="runtime"))
        same.require_identical(200)
        suites.append(same)
    else:
        print("SKIPPED: %s not found, so the parity suite for Spark's real template and the comparison of our "
              "template with it did not run (the other suites did)." % real_path)

    for name, template_file, generate, minimum in (
        ("qwen3 fixture", "chat_template_qwen3.jinja", lambda: qwen3_conversations(seed=3, count=150), 100),
        ("llama3 fixture", "chat_template_llama3.jinja", lambda: llama3_conversations(seed=4, count=150), 100),
    ):
        path = os.path.join(FIXTURES, template_file)
        cases = generate()
        suite = compare(Suite(name), cases, run_renderer(args.renderer, cases, path), reference,
                        file_template=read(path))
        suite.require_identical(minimum)
        suites.append(suite)

    ok = all([s.report() for s in suites])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
