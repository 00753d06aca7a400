#!/usr/bin/python3
"""spark-quantize under faults: the disk filling up while it writes (a file-size limit makes every write past
it fail, as ENOSPC does; the tool sees the same failed write) gives one `error:` line, exit status 1 and no
output or staging folder left; SIGKILL while it writes leaves no output folder (the output is renamed into
place whole), and the next run removes the killed run's staging folder and succeeds.
"""
import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import time


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def leftovers(work, name):
    return sorted(n for n in os.listdir(work) if n.startswith(name + ".partial-"))


def disk_full(quantize, src, work):
    out = os.path.join(work, "full")
    limit = 256 * 1024  # bytes: config.json fits, the weights do not

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write (EFBIG), not a killed process

    t0 = time.monotonic()
    proc = subprocess.run([quantize, "-m", src, "-o", out, "-f", "int8", "-t", "2"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300, preexec_fn=small_disk)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()]
    if proc.returncode != 1:
        fail(f"disk full: exit status {proc.returncode}, expected 1:\n{proc.stderr}")
    # Progress lines may come before it; the error is one line, the last.
    if len(errors) != 1 or errors[0] != lines[-1] or not errors[0].startswith("error: ") or "write failed" not in errors[0]:
        fail(f"disk full: expected one 'error: ... write failed' line at the end, got:\n{proc.stderr}")
    if os.path.exists(out) or leftovers(work, "full"):
        fail(f"disk full: output left behind: {os.listdir(work)}")
    print(f"disk full: '{errors[0]}', status 1 after {time.monotonic() - t0:.2f} s, nothing left behind")


def sigkill(quantize, src, work):
    out = os.path.join(work, "killed")
    for attempt in range(20):
        proc = subprocess.Popen([quantize, "-m", src, "-o", out, "-f", "int8", "-t", "1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stage = f"{out}.partial-{proc.pid}"
        deadline = time.monotonic() + 60
        while proc.poll() is None and not os.path.exists(stage) and time.monotonic() < deadline:
            time.sleep(0.001)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        if killed and os.path.exists(stage):
            break
        shutil.rmtree(out, ignore_errors=True)  # it finished before the kill: try again
    else:
        fail("could not kill spark-quantize while it was writing in 20 attempts")
    if os.path.exists(out):
        fail("SIGKILL: the output folder exists after the kill")
    subprocess.run([quantize, "-m", src, "-o", out, "-f", "int8", "-t", "2"], check=True, capture_output=True,
                   timeout=300)
    if not os.path.exists(os.path.join(out, "model.safetensors")) or leftovers(work, "killed"):
        fail(f"SIGKILL: the next run left {os.listdir(work)}")
    print(f"SIGKILL while writing (attempt {attempt + 1}): no output folder; the next run removed the staging "
          "folder and wrote the checkpoint")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    work = os.path.join(args.work_dir, "quantize-faults")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src = os.path.join(work, "tiny-bf16")
    subprocess.run([os.path.join(args.bin_dir, "spark-make-checkpoint"), "--preset", "tiny", "--seed", "3",
                    "-o", src], check=True, capture_output=True, timeout=300)
    quantize = os.path.join(args.bin_dir, "spark-quantize")
    disk_full(quantize, src, work)
    sigkill(quantize, src, work)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
