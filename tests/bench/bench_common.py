"""What every spark-bench test starts with: its --bin-dir / --work-dir arguments and a tiny checkpoint
generated in the work directory."""
import argparse
import os
import subprocess


def tiny_checkpoint(name, seed):
    """Parses --bin-dir and --work-dir, writes the tiny preset with `seed` to WORK_DIR/name; returns (args, path)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    model = os.path.join(args.work_dir, name)
    subprocess.run([os.path.join(args.bin_dir, "spark-make-checkpoint"), "--preset", "tiny", "--seed", str(seed),
                    "-o", model], check=True, capture_output=True)
    return args, model
