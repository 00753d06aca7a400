#!/usr/bin/env python3
"""Every form a real Hugging Face export takes loads, and serves the same model.

For each form `spark-make-checkpoint` can write (--form for config / weights / template forms,
--tokenizer-variant for tokenizer.json forms, --hf-repo-id for the hub cache layout) this test
  - greedy-decodes a prompt longer than the sliding window with `spark-server generate` and requires the
    same tokens as the plain form (same seed, so the same weights);
  - starts the server on the folder and requires its /tokenize ids to equal the npm `tokenizers` library's
    on that folder's tokenizer.json over the parity corpus (src/tokenizer/corpus);
  - sends one greedy chat request and, where the form keeps the prompt the same, requires the plain form's
    answer; then the check that belongs to the form (eos list stops on each id, generation_config.json
    defaults apply to omitted fields and --generation-config none turns them off, the stored tied head is
    ignored with a log line, a repo id resolves offline from the hub cache and a missing one is one line).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_npm  # noqa: E402
import tokenizer_parity_strings  # noqa: E402

SEED = 3
PROMPT_IDS = [(17 * i + 40) % 900 + 20 for i in range(48)]  # 48 tokens: past the tiny preset's 32-token window
CHAT = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "Name three colours."}]

CHECKPOINT_FORMS = ["torch-dtype", "eos-list", "generation-defaults", "stored-tied-head", "mixed-dtypes",
                    "index-metadata", "template-string", "template-list"]
# Tokenizer forms; `same_ids` says whether the form tokenizes like the plain one (so chat answers match).
TOKENIZER_VARIANTS = {
    "default": True, "null-normalizer": True, "nfc": False, "nfkc-lowercase": False,
    "added-normalized": False, "added-strip": False, "gpt2-bytelevel": False, "split-removed": False,
    "punct-whitespace": False, "decoders": True, "template-post": True,
}
GENERATION_DEFAULTS = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.05}


def run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


class Server:
    def __init__(self, bin_dir, model, extra=(), env=None):
        args = [os.path.join(bin_dir, "spark-server"), "--model", model, "--port", "0", "--threads", "2",
                "--kv-cache-memory-bytes", str(64 << 20), *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        self.log = ""
        deadline = time.time() + 60
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError(f"server exited ({self.proc.wait()}):\n{self.log}")
            self.log += line
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                break
            if time.time() > deadline:
                raise RuntimeError("server did not start:\n" + self.log)
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health") as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.05)

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    def get(self, path):
        with urllib.request.urlopen(self.url + path) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        # Read through the buffered reader: lines the start-up loop read ahead are in its buffer.
        self.log += self.proc.stderr.read()
        self.proc.wait(timeout=30)
        return self.log


def greedy(bin_dir, folder):
    out = run([os.path.join(bin_dir, "spark-server"), "generate", "--model", folder, "--prompt-ids",
               ",".join(map(str, PROMPT_IDS)), "-n", "16", "--threads", "2", "--json"]).stdout
    return json.loads(out)["generated_ids"]


def chat(server, **extra):
    body = {"model": server.get("/v1/models")["data"][0]["id"], "messages": CHAT, "max_tokens": 24, **extra}
    return server.post("/v1/chat/completions", body)


def text(reply):
    """The whole answer: reasoning (the demo model thinks first) and content."""
    m = reply["choices"][0]["message"]
    return (m.get("reasoning_content") or "") + "|" + (m.get("content") or "")


def npm_ids(module_dir, tokenizer_json, strings_path, work):
    out = os.path.join(work, "hf.jsonl")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer_hf_reference.cjs")
    run(["node", script, "encode", module_dir, tokenizer_json, strings_path, out])
    with open(out, encoding="utf-8") as f:
        return [json.loads(line)["ids"] for line in f.read().split("\n") if line.strip()]


class Checker:
    def __init__(self, args, module_dir, strings, strings_path, plain_greedy, plain_chat):
        self.args, self.module_dir = args, module_dir
        self.strings, self.strings_path = strings, strings_path
        self.plain_greedy, self.plain_chat = plain_greedy, plain_chat
        self.failures = []

    def expect(self, name, ok, what):
        if not ok:
            self.failures.append(f"{name}: {what}")
        return ok

    def common(self, name, folder, server, same_prompt):
        """Greedy tokens, /tokenize parity with npm tokenizers, and the chat answer."""
        self.expect(name, greedy(self.args.bin_dir, folder) == self.plain_greedy,
                    "greedy tokens differ from the plain form's")
        ref = npm_ids(self.module_dir, os.path.join(folder, "tokenizer.json"), self.strings_path, folder)
        bad = 0
        for s, r in zip(self.strings, ref):
            ours = server.post("/tokenize", {"prompt": s, "add_special_tokens": False})["tokens"]
            if ours != r:
                bad += 1
                if bad <= 3:
                    self.failures.append(f"{name}: /tokenize {s[:60]!r}: ours {ours[:20]} HF {r[:20]}")
        self.expect(name, len(ref) == len(self.strings), "the reference gave a different number of results")
        answer = chat(server, temperature=0)
        if same_prompt:
            self.expect(name, text(answer) == self.plain_chat,
                        "the greedy chat answer differs from the plain form's")
        print(f"{name:22s} greedy {'ok'}, /tokenize {len(self.strings) - bad}/{len(self.strings)} equal to HF"
              f"{', chat answer equal' if same_prompt else ''}")
        return answer


def main():
    args, module_dir = tokenizer_npm.golden_test_setup()
    if module_dir is None:
        return 1
    work = os.path.join(args.work_dir, "checkpoint-forms")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    make = os.path.join(args.bin_dir, "spark-make-checkpoint")

    def make_folder(name, *flags):
        folder = os.path.join(work, name)
        run([make, "--preset", "tiny", "--seed", str(SEED), "-o", folder, *flags])
        return folder

    plain = make_folder("plain")
    with open(os.path.join(plain, "tokenizer.json"), encoding="utf-8") as f:
        added = [t["content"] for t in json.load(f)["added_tokens"]]
    # A slice of the parity corpus: every tenth string keeps each form's check to seconds.
    strings = tokenizer_parity_strings.generate(os.path.join(args.source_dir, "src", "tokenizer", "corpus"), added)
    strings = strings[::10]
    strings_path = os.path.join(work, "strings.jsonl")
    with open(strings_path, "w", encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s, ensure_ascii=True) + "\n")

    plain_greedy = greedy(args.bin_dir, plain)
    server = Server(args.bin_dir, plain)
    plain_chat = text(chat(server, temperature=0))
    eos_probe = chat(server, logit_bias={"7": 100}, max_tokens=4)["choices"][0]
    server.stop()
    c = Checker(args, module_dir, strings, strings_path, plain_greedy, plain_chat)
    c.expect("plain", eos_probe["finish_reason"] == "length", "token 7 stopped generation without an eos list")

    for form in CHECKPOINT_FORMS:
        flags = ["--form", form] + (["--shards", "3"] if form == "index-metadata" else [])
        folder = make_folder(form, *flags)
        server = Server(args.bin_dir, folder)
        c.common(form, folder, server, same_prompt=True)
        if form == "eos-list":
            choice = chat(server, logit_bias={"7": 100}, max_tokens=4)["choices"][0]
            c.expect(form, choice["finish_reason"] == "stop" and not choice["message"].get("content"),
                     f"the second eos id (7) did not stop generation: {choice}")
        if form == "generation-defaults":
            model = server.get("/v1/models")["data"][0]
            c.expect(form, model.get("generation_defaults") == GENERATION_DEFAULTS,
                     f"/v1/models shows {model.get('generation_defaults')}")
            omitted = text(chat(server, seed=11, max_tokens=48))
            explicit = text(chat(server, seed=11, max_tokens=48, **GENERATION_DEFAULTS))
            openai_defaults = text(chat(server, seed=11, max_tokens=48, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0,
                                        repetition_penalty=1.0))
            c.expect(form, omitted == explicit, "a request without sampling fields did not get the file's values")
            c.expect(form, omitted != openai_defaults, "the file's values made no difference (test is blind)")
        log = server.stop()
        if form == "stored-tied-head":
            c.expect(form, "lm_head.weight is stored but tie_word_embeddings is true" in log,
                     "no log line about the ignored head")
        if form == "generation-defaults":
            off = Server(args.bin_dir, folder, ["--generation-config", "none"])
            model = off.get("/v1/models")["data"][0]
            got = text(chat(off, seed=11, max_tokens=48))
            off.stop()
            c.expect(form, model.get("generation_defaults") == {}, "--generation-config none still shows defaults")
            c.expect(form, got == openai_defaults, "--generation-config none did not restore OpenAI's defaults")

    for variant, same_ids in TOKENIZER_VARIANTS.items():
        folder = make_folder("tok-" + variant, "--tokenizer-variant", variant)
        server = Server(args.bin_dir, folder)
        c.common("tokenizer " + variant, folder, server, same_prompt=same_ids)
        server.stop()

    # The hub cache: files are symlinks into blobs/, refs/main names the snapshot, --model takes the repo id.
    hub = os.path.join(work, "hf-home", "hub")
    snapshot = run([make, "--preset", "tiny", "--seed", str(SEED), "-o", hub, "--hf-repo-id", "spark-ai/Spark-X2.5-tiny"]
                   ).stdout.strip()
    c.expect("hf-cache", os.path.islink(os.path.join(snapshot, "model.safetensors")), "snapshot files are not symlinks")
    env = {"HF_HOME": os.path.join(work, "hf-home"), "HF_HUB_CACHE": ""}
    server = Server(args.bin_dir, "spark-ai/Spark-X2.5-tiny", env=env)
    c.expect("hf-cache", server.get("/v1/models")["data"][0]["id"] == "spark-ai/Spark-X2.5-tiny",
             "the served model name is not the repo id")
    c.common("hf-cache repo id", snapshot, server, same_prompt=True)
    server.stop()
    missing = subprocess.run([os.path.join(args.bin_dir, "spark-server"), "--model", "spark-ai/not-there", "--port", "0"],
                             capture_output=True, text=True, timeout=10, env={**os.environ, **env})
    lines = [l for l in missing.stderr.splitlines() if l.startswith("error:")]
    c.expect("hf-cache", missing.returncode != 0 and len(lines) == 1 and "models--spark-ai--not-there" in lines[0]
             and "nothing is downloaded" in lines[0], f"missing repo id: exit {missing.returncode}, stderr {missing.stderr}")
    print("hf-cache               missing repo id: " + (lines[0] if lines else "(nothing)"))

    for f in c.failures:
        print("FAIL " + f)
    print("PASS" if not c.failures else f"FAIL ({len(c.failures)} problems)")
    return 0 if not c.failures else 1


if __name__ == "__main__":
    sys.exit(main())
