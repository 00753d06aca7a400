#!/usr/bin/python3
"""User-facing check of checkpoint errors: `spark-server generate` and `spark-server` (serve) on a damaged or
missing checkpoint must print exactly one line `error: ...` naming the file (and the tensor where there is one)
and exit with status 1, never a signal. (serve also logs, once, where it listens; nothing else.)

The C++ unit tests cover each loader defect in depth; this checks what a user sees from the command line.
Each case damages a copy of a freshly made random checkpoint in its own way.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

MISSING_TENSOR = "model.layers.2.mlp.up_proj.weight"


def read_header(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def write_safetensors(path, header, data):
    raw = json.dumps(header).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # keep the data 8-byte aligned, as writers do
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)


def truncate(folder):
    """Cut the file in half; the error must name a tensor whose bytes are now past the end."""
    path = os.path.join(folder, "model.safetensors")
    header, data = read_header(path)
    size = os.path.getsize(path)
    cut = size // 2
    with open(path, "r+b") as f:
        f.truncate(cut)
    data_left = len(data) - (size - cut)
    lost = [k for k, v in header.items() if k != "__metadata__" and v["data_offsets"][1] > data_left]
    return "model.safetensors", lost


def header_past_end(folder):
    path = os.path.join(folder, "model.safetensors")
    with open(path, "r+b") as f:
        f.write(struct.pack("<Q", os.path.getsize(path) * 4))
    return "model.safetensors", None


def invalid_header_json(folder):
    path = os.path.join(folder, "model.safetensors")
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(b"[")  # the header's opening brace becomes a bracket
    return "model.safetensors", None


def missing_tensor(folder):
    path = os.path.join(folder, "model.safetensors")
    header, data = read_header(path)
    del header[MISSING_TENSOR]
    write_safetensors(path, header, data)
    return "model.safetensors", [MISSING_TENSOR]


def attention_bias(folder):
    path = os.path.join(folder, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["attention_bias"] = True
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return "config.json", ["attention_bias"]


def missing_shard(folder):
    os.remove(os.path.join(folder, "model-00002-of-00003.safetensors"))
    return "model-00002-of-00003.safetensors", None


CASES = [("truncated safetensors", truncate, 1), ("header length past the end", header_past_end, 1),
         ("header not JSON", invalid_header_json, 1), ("tensor removed from the header", missing_tensor, 1),
         ("config attention_bias true", attention_bias, 1), ("shard file missing", missing_shard, 3)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    server = os.path.join(args.bin_dir, "spark-server")
    make = os.path.join(args.bin_dir, "spark-make-checkpoint")
    work = os.path.join(args.work_dir, "loader-errors")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    passed = failed = 0
    pristine = {}
    for shards in sorted({s for _, _, s in CASES}):
        pristine[shards] = os.path.join(work, f"pristine-{shards}")
        subprocess.run([make, "--preset", "tiny", "--seed", "5", "--shards", str(shards), "-o", pristine[shards]],
                       check=True, stdout=subprocess.DEVNULL)
        # The undamaged checkpoint must load, or every case below would pass for the wrong reason.
        ok = subprocess.run([server, "generate", "--model", pristine[shards], "--prompt-ids", "14,15", "-n", "1",
                             "-t", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        if ok.returncode != 0:
            print(f"FAIL  pristine {shards}-shard checkpoint does not load (exit {ok.returncode})")
            failed += 1

    runs = []
    for i, (title, damage, shards) in enumerate(CASES):
        folder = os.path.join(work, f"case{i}")
        shutil.copytree(pristine[shards], folder)
        runs.append((title, folder, *damage(folder)))
    missing = os.path.join(work, "no-such-folder")
    runs.append(("model folder missing", missing, missing, []))
    for title, folder, file_name, tensors in runs:
        for mode, cmd in [("generate", [server, "generate", "--model", folder, "--prompt-ids", "14,15", "-n", "1",
                                        "-t", "1"]),
                          ("serve", [server, "--model", folder, "--port", "0", "--threads", "1"])]:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            problems = []
            if mode == "serve":
                # Its one other line says where it listens (health answers 503 while it loads).
                others = [line for line in lines if "spark-server listening on" not in line]
                if len(others) != len(lines) - 1:
                    problems.append(f"serve did not log its listening line once: {proc.stderr!r}")
                lines = others
            if proc.returncode != 1:
                problems.append(f"exit status {proc.returncode}" + (" (a signal)" if proc.returncode < 0 else ""))
            if len(lines) != 1 or not lines[0].startswith("error: "):
                problems.append(f"stderr has not exactly one `error: ` line: {proc.stderr!r}")
            message = lines[0] if lines else ""
            if file_name not in message:
                problems.append(f"does not name {file_name}")
            if tensors and not any(t in message for t in tensors):
                problems.append(f"names none of {tensors[:3]}{'...' if len(tensors) > 3 else ''}")
            status = "ok  " if not problems else "FAIL"
            print(f"{status}  {mode}, {title}: {message}")
            for p in problems:
                print(f"        {p}")
            passed += not problems
            failed += bool(problems)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
