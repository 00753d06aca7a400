#!/usr/bin/env python3
"""Hostile-shaped requests against a running spark-server, timed one at a time.

Fuzzing finds crashes; this finds the other way one request can hurt a server: work that grows faster
than its body (a scan per key, a compile before a cheap refusal). Each case is a body of a few MB shaped
to hit one parser or preparation step (wide objects, deep schema text, long words, many tools, large
constraints). Every answer must be an HTTP status (no dropped connection) within --max-seconds, and the
server must answer /health at the end. Prints a markdown table; exit 1 on any failure.

    build/bin/spark-server --port 8000 &   # the random-weight demo
    tools/slow_request_probe.py --url http://127.0.0.1:8000 --model spark-demo
"""
import argparse
import json
import random
import string
import sys
import time
import urllib.error
import urllib.request


def post(url, body, timeout):
    data = json.dumps(body).encode()
    start = time.monotonic()
    try:
        with urllib.request.urlopen(
                urllib.request.Request(url, data, {"Content-Type": "application/json"}), timeout=timeout) as r:
            status, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    except Exception as e:  # a dropped connection or a timeout: the case fails
        status, text = None, str(e).encode()
    return time.monotonic() - start, status, text, len(data)


def cases(model):
    rnd = random.Random(1)
    user = lambda c: [{"role": "user", "content": c}]
    chat = lambda **kw: ("/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": user("hi"), **kw})
    wide = {f"k{i}": i for i in range(200000)}
    word = "".join(rnd.choice(string.ascii_letters) for _ in range(3_000_000))
    deep = '{"a":' * 100000 + "{}" + "}" * 100000
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": json.dumps(wide)}}

    def tool(i, n):
        props = {f"p{j}_{'x' * 20}": {"type": "string", "description": "d" * 10} for j in range(n)}
        return {"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object", "properties": props}}}

    tools = [tool(i, 800) for i in range(100)]
    schema = lambda s: {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}

    def nested(depth, leaf):  # {"a": {"a": ... {leaf: {}}}}
        v = {leaf: {}}
        for _ in range(depth - 1):
            v = {"a": v}
        return v
    return [
        ("object of 200k keys (chat_template_kwargs)", *chat(chat_template_kwargs=wide)),
        ("tool-call arguments of 200k keys", "/v1/chat/completions",
         {"model": model, "max_tokens": 2, "messages": user("hi") + [
             {"role": "assistant", "content": None, "tool_calls": [call]},
             {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}),
        ("guided_json text nested 100k deep", *chat(guided_json=deep)),
        ("150k messages", "/v1/chat/completions",
         {"model": model, "max_tokens": 2, "messages": user("a") * 150000}),
        ("150k content parts", "/v1/chat/completions",
         {"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}] * 150000}]}),
        ("one 3M-letter word", "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": user(word)}),
        ("3M spaces", "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": user(" " * 3_000_000)}),
        ("1M CJK characters", "/v1/chat/completions", {"model": model, "max_tokens": 2, "messages": user("\u4e2d" * 1_000_000)}),
        ("/tokenize a 3M-letter word", "/tokenize", {"model": model, "prompt": word}),
        ("completions of 1M token ids", "/v1/completions", {"model": model, "max_tokens": 2, "prompt": [5] * 1_000_000}),
        ("100 tools x 62 KB, auto", *chat(tools=tools)),
        ("100 tools x 62 KB, required", *chat(tools=tools, tool_choice="required")),
        ("enum of 80k strings (1 MB)", *chat(response_format=schema({"enum": [f"v{i}" for i in range(80000)]}))),
        ("required of 80k names (1 MB)", *chat(response_format=schema({"type": "object", "required": [f"r{i}" for i in range(80000)]}))),
        ("object of 4k optional properties (120 KB)", *chat(response_format=schema(
            {"type": "object", "additionalProperties": False,
             "properties": {f"k{i}": {"type": "integer"} for i in range(4000)}}))),
        ("regex (a{1000}){1000}", *chat(structured_outputs={"regex": "(a{1000}){1000}"})),
        ("regex (.*a*.*.*){200}: 20 bytes, closures to their bound", *chat(structured_outputs={"regex": "(.*a*.*.*){200}"})),
        ("regex of 400k nested groups", *chat(structured_outputs={"regex": "(" * 400000 + "a" + ")" * 400000})),
        ("schema pattern of 400k '.'", *chat(response_format=schema({"type": "string", "pattern": "." * 400000}))),
        ("regex of 400k alternatives", *chat(structured_outputs={"regex": "|".join(["a"] * 400000)})),
        ("anyOf of 15k strings with pattern and maxLength (0.9 MB)", *chat(response_format=schema(
            {"anyOf": [{"type": "string", "pattern": f"^b{i}", "maxLength": 20} for i in range(15000)]}))),
        ("6k patternProperties (0.2 MB)", *chat(response_format=schema(
            {"type": "object", "patternProperties": {f"^k{i}[a-z]*$": {"type": "integer"} for i in range(6000)}}))),
        ("allOf of 6k objects (0.4 MB)", *chat(response_format=schema(
            {"allOf": [{"type": "object", "properties": {f"p{i}": {"type": "integer"}}} for i in range(6000)]}))),
        ("const object of 60k keys (1 MB)", *chat(response_format=schema({"const": {f"k{i}": i for i in range(60000)}}))),
        ("schema pattern a + 300k '*'", *chat(response_format=schema({"type": "string", "pattern": "a" + "*" * 300000}))),
        ("chain of 20k $refs (0.7 MB)", *chat(response_format=schema(
            {"$ref": "#/$defs/a0", "$defs": {**{f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(20000)},
                                             "a20000": {"type": "integer"}}}))),
        ("enum of 1k equal 120-deep objects (0.9 MB)", *chat(response_format=schema(
            {"enum": [nested(120, "a") for _ in range(1000)]}))),
        ("enum of 1k distinct 120-deep objects (0.9 MB)", *chat(response_format=schema(
            {"enum": [nested(120, f"{i}") for i in range(1000)]}))),
        ("choice of 100k strings", *chat(structured_outputs={"choice": [f"c{i}" for i in range(100000)]})),
        ("/v1/responses with 150k input items", "/v1/responses",
         {"model": model, "max_output_tokens": 16, "input": user("a") * 150000}),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="spark-demo")
    ap.add_argument("--max-seconds", type=float, default=5.0, help="slowest answer allowed per case")
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    a = ap.parse_args()
    failed = 0
    print("| case | body | status | seconds | answer |\n|---|---|---|---|---|")
    for name, path, body in cases(a.model):
        if a.only not in name:
            continue
        seconds, status, text, size = post(a.url + path, body, timeout=max(60.0, 4 * a.max_seconds))
        ok = status is not None and status < 500 and seconds <= a.max_seconds
        failed += not ok
        answer = text[:90].decode("utf-8", "replace").replace("|", "/").replace("\n", " ")
        print(f"| {name} | {size / 1e6:.2f} MB | {status} | {seconds:.2f}{'' if ok else ' FAIL'} | `{answer}` |",
              flush=True)
    try:
        with urllib.request.urlopen(a.url + "/health", timeout=10) as r:
            alive = r.status == 200
    except Exception:
        alive = False
    print(f"\n/health after the cases: {'200' if alive else 'no answer'}; {failed} case(s) failed")
    return 0 if alive and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
