#!/usr/bin/env python3
"""Tokenizer parity: our tokenizer against Hugging Face `tokenizers` (npm) on thousands of strings.

For the generated Spark tokenizers (tiny preset, vocabulary 1024, and demo, 4096) the ids must be
identical (encoded without and with special tokens), decode(encode(s)) must give s back, and our decode
(with and without special tokens) must equal theirs. Every `spark-make-checkpoint --tokenizer-variant`
form (normalizers, normalized and stripped added tokens, other pre-tokenizers, decoder steps, a
TemplateProcessing post-processor) is checked the same way on the tiny preset, with decode(encode(s)) == s
only where the form keeps the text. Variants of the demo tokenizer with other pre-tokenizers (GPT-2's
ByteLevel regex with a prefix space, a Qwen-style single Split, every Split behavior, Digits in runs) and
with added-token options (lstrip, rstrip, single_word, normalized) check that the loader is generic.
Over every code point: each character class the pre-tokenizers use, the Punctuation / Whitespace /
WhitespaceSplit steps, and the NFC and NFKC + Lowercase normalizers.
Our side runs as one process per tokenizer through `spark-server tokenize --jsonl`.
"""
import copy
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_npm  # noqa: E402
import tokenizer_parity_strings  # noqa: E402

# Character classes the pre-tokenizers use, each checked over every code point. `keep` says which side
# of the split survives (the smaller one, to keep the output small).
CLASS_CHECKS = [
    (r"\p{L}", "matches"), (r"\p{M}", "matches"), (r"\p{N}", "matches"), (r"\p{Nd}", "matches"),
    (r"\p{P}", "matches"), (r"\p{S}", "matches"), (r"\p{Z}", "matches"), (r"\s", "matches"),
    (r"\S", "gaps"), (r"\d", "matches"), (r"\w", "matches"), (r"\P{L}", "gaps"),
    (r"[^\s\p{L}\p{N}]", "gaps"), (r"[^\r\n\p{L}\p{P}\p{S}]", "gaps"), (r"[\p{L}\p{M}]", "matches"),
    ("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]", "matches"),
]

# spark-make-checkpoint --tokenizer-variant names, and those whose decode(encode(s)) gives s back (no
# prefix space added, no text removed, normalized or stripped around added tokens).
TOKENIZER_VARIANTS = ["default", "null-normalizer", "nfc", "nfkc-lowercase", "added-normalized", "added-strip",
                      "gpt2-bytelevel", "split-removed", "punct-whitespace", "decoders", "template-post"]
ROUND_TRIP_VARIANTS = {"default", "null-normalizer", "decoders", "template-post"}

# Strings where normalizers and added-token options make a difference.
NORMALIZATION_STRINGS = [
    "<THINK>x</THINK>", "<Think> y </tHINK>", "\uff28\uff45\uff4c\uff4c\uff4f \uff37\uff2f\uff32\uff2c\uff24",
    "\ufb01nance \ufb02ow", "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03a3", "\u0130stanbul \u0130",
    "\u01c5 \u01c4", "e\u0301 vs \u00e9", "\u212b \u2126 \u00c5", "a  <think>  b  </think>  c",
    " <|User|> hi <|Bot|> ", "x<arg_value>y <arg_value> z", "k<arg_key>v", "TOOL<TOOL_CALL>", "\u2460\u2461 \u3280",
    "\u3000<think>\u3000", "\t<|fim_prefix|>\n\n<|fim_suffix|>\t", "<tool_call>\n</tool_call>\n",
    "\u1e9e\u00df STRASSE", "\u0049\u0307", "\ufe64\ufe65", "x\u00a0<think>\u00a0y",
]

# Pre-tokenizer steps checked over every code point like the classes above (kept pieces compared).
STEP_CHECKS = [
    ("Punctuation", {"type": "Punctuation", "behavior": "Removed"}),
    ("Whitespace", {"type": "Whitespace"}),
    ("WhitespaceSplit", {"type": "WhitespaceSplit"}),
]

# --tokenizer-variant forms whose normalizers are checked over every code point (ids compared).
NORMALIZER_CHECKS = ["nfc", "nfkc-lowercase"]

QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")


def run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def read_jsonl(path):
    with open(path, encoding="utf-8", newline="") as f:
        return [json.loads(line) for line in f.read().split("\n") if line.strip()]


def write_tokenizer(folder, config):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    return folder


def byte_level(pre):
    return {"type": "ByteLevel", "add_prefix_space": pre, "trim_offsets": True, "use_regex": False}


def variants(base, work):
    """(name, folder) of tokenizers that share the demo vocabulary but not its pre-tokenizer or options."""
    out = []
    gpt2 = copy.deepcopy(base)
    gpt2["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    out.append(("gpt2-bytelevel", write_tokenizer(os.path.join(work, "gpt2"), gpt2)))
    qwen = copy.deepcopy(base)
    qwen["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN_REGEX}, "behavior": "Isolated", "invert": False},
        byte_level(False)]}
    out.append(("qwen-split", write_tokenizer(os.path.join(work, "qwen"), qwen)))
    behaviors = copy.deepcopy(base)
    behaviors["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"\p{P}"}, "behavior": "MergedWithPrevious", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"[a-z]+"}, "behavior": "Contiguous", "invert": True},
        {"type": "Split", "pattern": {"String": "x"}, "behavior": "Removed", "invert": False},
        {"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "Isolated", "invert": True},
        {"type": "Digits", "individual_digits": False},
        byte_level(True)]}
    out.append(("split-behaviors", write_tokenizer(os.path.join(work, "behaviors"), behaviors)))
    options = copy.deepcopy(base)
    for t in options["added_tokens"]:
        c = t["content"]
        if c in ("<think>", "<|User|>"):
            t["lstrip"] = True
        if c in ("</think>", "<|Bot|>"):
            t["rstrip"] = True
        if c in ("<arg_key>", "<tool_call>"):
            t["single_word"] = True
        if c in ("<arg_value>", "</tool_call>", "<tool_response>"):
            t["normalized"] = True
    out.append(("added-token-options", write_tokenizer(os.path.join(work, "options"), options)))
    return out


def check_classes(base, work, args, module_dir):
    """Our pre-tokenizer against the reference's over all of Unicode, one character class at a time."""
    folder = os.path.join(work, "classes")
    os.makedirs(folder, exist_ok=True)
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    text_path = os.path.join(folder, "all-code-points.jsonl")
    with open(text_path, "w", encoding="utf-8") as f:
        for i in range(0, len(cps), 4096):
            f.write(json.dumps("".join(chr(c) for c in cps[i:i + 4096]), ensure_ascii=True) + "\n")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer_hf_reference.cjs")
    server = os.path.join(args.bin_dir, "spark-server")
    ok = True
    checks = [(regex, {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Removed",
                       "invert": keep == "matches"}) for regex, keep in CLASS_CHECKS] + STEP_CHECKS
    for n, (regex, step) in enumerate(checks):
        config = copy.deepcopy(base)
        config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [step, byte_level(False)]}
        sub = write_tokenizer(os.path.join(folder, f"class{n}"), config)
        ref_path = os.path.join(sub, "hf-pieces.jsonl")
        run(["node", script, "pieces", module_dir, os.path.join(sub, "tokenizer.json"), text_path, ref_path])
        ours = run([server, "tokenize", "--model", sub, "--jsonl", "--pieces", "--file", text_path]).stdout
        ref = read_jsonl(ref_path)
        mine = [json.loads(l) for l in ours.split("\n") if l.strip()]
        bad = [i for i, (r, m) in enumerate(zip(ref, mine)) if r != m]
        if len(ref) != len(mine) or bad:
            ok = False
            where = f"code points {bad[0] * 4096:#x}.. of the sequence" if bad else "line counts"
            print(f"class {regex:28s} DIFFERS ({len(bad)} blocks; first at {where})")
            if bad:
                r, m = set("".join(ref[bad[0]])), set("".join(mine[bad[0]]))
                print(f"    only HF keeps {sorted(r - m)[:10]}; only we keep {sorted(m - r)[:10]}")
        else:
            print(f"class {regex:28s} ok over {len(cps)} code points")
    for name in NORMALIZER_CHECKS:
        sub = os.path.join(work, "tokenizer-variant-" + name)
        ref_path = os.path.join(folder, f"normalizer-{name}-hf.jsonl")
        run(["node", script, "encode", module_dir, os.path.join(sub, "tokenizer.json"), text_path, ref_path])
        ours = run([server, "tokenize", "--model", sub, "--jsonl", "--file", text_path]).stdout
        ref = [r["ids"] for r in read_jsonl(ref_path)]
        mine = [json.loads(l) for l in ours.split("\n") if l.strip()]
        bad = [i for i, (r, m) in enumerate(zip(ref, mine)) if r != m]
        if len(ref) != len(mine) or bad:
            ok = False
            print(f"normalizer of {name:18s} DIFFERS ({len(bad)} blocks of 4096 code points; first {bad[:1]})")
        else:
            print(f"normalizer of {name:18s} ok over {len(cps)} code points")
    return ok


def describe(s, limit=120):
    r = repr(s)
    return r if len(r) <= limit else r[:limit] + "..."


def check(name, folder, strings_path, strings, args, module_dir, roundtrip):
    tok_json = os.path.join(folder, "tokenizer.json")
    ref_path = os.path.join(folder, "hf.jsonl")
    run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer_hf_reference.cjs"), "encode",
         module_dir, tok_json, strings_path, ref_path])
    server = os.path.join(args.bin_dir, "spark-server")
    ours_by_mode = {}
    for special in (False, True):
        ours_path = os.path.join(folder, "ours-special.jsonl" if special else "ours.jsonl")
        cmd = [server, "tokenize", "--model", folder, "--jsonl", "--file", strings_path]
        if special:
            cmd.append("--add-special-tokens")
        with open(ours_path, "w", encoding="utf-8") as out:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"spark-server tokenize failed for {name}: {proc.stderr[-3000:]}")
        ours_by_mode[special] = (ours_path, read_jsonl(ours_path))
    ref = read_jsonl(ref_path)
    ours_path, ours = ours_by_mode[False]
    ours_special = ours_by_mode[True][1]
    if len(ref) != len(strings) or len(ours) != len(strings) or len(ours_special) != len(strings):
        raise RuntimeError(f"{name}: expected {len(strings)} results, got {len(ref)} (HF), {len(ours)} and "
                           f"{len(ours_special)} (ours)")
    failures = []
    for s, r, o, o_special in zip(strings, ref, ours, ours_special):
        if r["ids"] != o:
            failures.append(f"ids differ for {describe(s)}:\n      HF   {r['ids'][:40]}\n      ours {o[:40]}")
        if r["ids_special"] != o_special:
            failures.append(f"ids with special tokens differ for {describe(s)}:\n      HF   {r['ids_special'][:40]}"
                            f"\n      ours {o_special[:40]}")
    for skip in (False, True):
        cmd = [server, "detokenize", "--model", folder, "--jsonl", "--file", ours_path]
        if skip:
            cmd.append("--skip-special-tokens")
        decoded = [json.loads(l) for l in run(cmd).stdout.split("\n") if l.strip()]
        key = "decoded_skip" if skip else "decoded"
        for s, r, d in zip(strings, ref, decoded):
            if d != r[key]:
                failures.append(f"decode(skip_special={skip}) differs for {describe(s)}: "
                                f"HF {describe(r[key])} ours {describe(d)}")
            if roundtrip and not skip and d != s:
                failures.append(f"decode(encode(s)) != s for {describe(s)}: got {describe(d)}")
    total_ids = sum(len(o) for o in ours)
    with_special = sum(1 for o, o_special in zip(ours, ours_special) if o != o_special)
    status = "ok" if not failures else f"{len(failures)} FAILURES"
    print(f"{name:22s} {len(strings)} strings, {total_ids} ids, {with_special} changed by special tokens, "
          f"decode{' + round trip' if roundtrip else ''}: {status}")
    for f in failures[:15]:
        print("    " + f)
    return not failures


def check_variants(args, module_dir, corpus_dir, work):
    """Every --tokenizer-variant folder of the tiny preset against the reference."""
    started = time.monotonic()
    ok = True
    strings = None
    strings_path = os.path.join(work, "tokenizer-variant-strings.jsonl")
    for name in TOKENIZER_VARIANTS:
        folder = os.path.join(work, "tokenizer-variant-" + name)
        run([os.path.join(args.bin_dir, "spark-make-checkpoint"), "--preset", "tiny", "--tokenizer-variant", name,
             "--out", folder])
        if strings is None:
            with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
                added = [t["content"] for t in json.load(f)["added_tokens"]]
            strings = tokenizer_parity_strings.generate(corpus_dir, added, seed=11)
            strings += NORMALIZATION_STRINGS + [a.upper() for a in added] + [f" x {a.title()} y " for a in added]
            with open(strings_path, "w", encoding="utf-8") as f:
                for s in strings:
                    f.write(json.dumps(s, ensure_ascii=True) + "\n")
        ok &= check("variant " + name, folder, strings_path, strings, args, module_dir,
                    roundtrip=name in ROUND_TRIP_VARIANTS)
    print(f"{len(TOKENIZER_VARIANTS)} tokenizer variants checked in {time.monotonic() - started:.0f} s")
    return ok


def main():
    args, module_dir = tokenizer_npm.golden_test_setup()
    if module_dir is None:
        return 1

    work = os.path.join(args.work_dir, "tokenizer-parity")
    os.makedirs(work, exist_ok=True)
    corpus_dir = os.path.join(args.source_dir, "src", "tokenizer", "corpus")
    ok = True
    demo_config = None
    for preset in ("tiny", "demo"):
        folder = os.path.join(work, preset)
        run([os.path.join(args.bin_dir, "spark-make-checkpoint"), "--preset", preset, "--out", folder])
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            config = json.load(f)
        if preset == "demo":
            demo_config = config
        added = [t["content"] for t in config["added_tokens"]]
        strings = tokenizer_parity_strings.generate(corpus_dir, added)
        if len(strings) < 3000:
            print(f"FAIL: only {len(strings)} test strings")
            return 1
        strings_path = os.path.join(folder, "strings.jsonl")
        with open(strings_path, "w", encoding="utf-8") as f:
            for s in strings:
                f.write(json.dumps(s, ensure_ascii=True) + "\n")
        ok &= check(f"spark-{preset}", folder, strings_path, strings, args, module_dir, roundtrip=True)

    added = [t["content"] for t in demo_config["added_tokens"]]
    strings = tokenizer_parity_strings.generate(corpus_dir, added, seed=7)
    strings_path = os.path.join(work, "variant-strings.jsonl")
    with open(strings_path, "w", encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s, ensure_ascii=True) + "\n")
    for name, folder in variants(demo_config, os.path.join(work, "variants")):
        ok &= check(name, folder, strings_path, strings, args, module_dir, roundtrip=False)
    ok &= check_variants(args, module_dir, corpus_dir, work)
    ok &= check_classes(demo_config, work, args, module_dir)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
