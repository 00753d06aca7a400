"""Installs Hugging Face's `tokenizers` npm package (the Rust core behind Python's `tokenizers`) into a
folder under the build directory, once. Shared by the tokenizer parity test and the tokenizer benchmark.
"""
import argparse
import json
import os
import shutil
import subprocess

TOKENIZERS_VERSION = "0.23.2"  # napi build with a linux-x64-gnu binary; runs on Node 20


def ensure_tokenizers(prefix):
    """Returns the package folder (for require()); raises RuntimeError when it cannot be installed."""
    prefix = os.path.abspath(prefix)  # require() reads a relative path as a package name
    module_dir = os.path.join(prefix, "node_modules", "tokenizers")
    manifest = os.path.join(module_dir, "package.json")
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as f:
            if json.load(f).get("version") == TOKENIZERS_VERSION:
                return module_dir
    npm = shutil.which("npm")
    node = shutil.which("node")
    if npm is None or node is None:
        raise RuntimeError("node and npm are required (tools/install-deps.sh installs them)")
    os.makedirs(prefix, exist_ok=True)
    cmd = [npm, "install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error",
           f"tokenizers@{TOKENIZERS_VERSION}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not os.path.exists(manifest):
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return module_dir


def golden_test_setup():
    """The arguments every tokenizer golden test takes (--bin-dir, --work-dir, --source-dir, --node-prefix)
    and the installed package folder; the folder is None (after printing FAIL) when it cannot be installed:
    the registry is reachable on our machines and in CI, so an install failure is a test failure."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--node-prefix", required=True)
    args = ap.parse_args()
    try:
        return args, ensure_tokenizers(args.node_prefix)
    except RuntimeError as e:
        print(f"FAIL: cannot install the reference tokenizers npm package: {e}")
        return args, None
