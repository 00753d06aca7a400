#!/usr/bin/python3
"""Fail fast: a start-up error ends spark-server with one `error:` line naming the file and a non-zero status
within a second, every time, even while a load balancer polls /health (the HTTP listener runs during
loading); and SIGTERM while the model is still loading ends the process promptly.

Each run starts the real binary on a checkpoint whose config.json must be refused, with a thread polling
/health every 20 ms over a keep-alive connection from before the server is up until it has exited.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

RUNS = 20
EXIT_WITHIN_S = 1.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_checkpoint(bin_dir, work_dir, name):
    dest = os.path.join(work_dir, name)
    if not os.path.exists(os.path.join(dest, "model.safetensors")):
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run([os.path.join(bin_dir, "spark-make-checkpoint"), "--preset", "tiny", "-o", dest],
                       check=True, capture_output=True)
    return dest


def poll_health(port, stop, seen, connected):
    """GET /health every 20 ms on one keep-alive connection until `stop`; while there is no connection, try
    to open one every millisecond (the server listens for only a few ms before a config error ends it).
    `connected` counts the connections opened to the server's listening socket."""
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
                conn.connect()
                connected.append(1)
            conn.request("GET", "/health")
            r = conn.getresponse()
            r.read()
            seen.append(r.status)
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conn = None
            stop.wait(0.001)
            continue
        stop.wait(0.02)
    if conn is not None:
        conn.close()


def start(bin_dir, model, port, extra=(), env=None):
    return subprocess.Popen(
        [os.path.join(bin_dir, "spark-server"), "--model", model, "--port", str(port), "--threads", "2",
         "--kv-cache-memory-bytes", str(64 << 20), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def read_lines(proc, lines):
    """Collects (time, line) for each stderr line until EOF."""
    for line in proc.stderr:
        lines.append((time.monotonic(), line.rstrip("\n")))


def broken_config_run(bin_dir, model, run):
    port = free_port()
    stop = threading.Event()
    statuses, connected = [], []
    poller = threading.Thread(target=poll_health, args=(port, stop, statuses, connected))
    poller.start()  # before the server exists: the first polls are refused, later ones race the failure
    started = time.monotonic()
    proc = start(bin_dir, model, port)
    lines = []
    reader = threading.Thread(target=read_lines, args=(proc, lines))
    reader.start()
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join()
        stop.set()
        poller.join()
        raise AssertionError(f"run {run}: the server did not exit within 30 s:\n" +
                             "\n".join(l for _, l in lines))
    exited = time.monotonic()
    reader.join()
    stop.set()
    poller.join()
    text = "\n".join(l for _, l in lines)
    errors = [(t, l) for t, l in lines if "error" in l.lower()]
    assert code not in (0, None) and code > 0, f"run {run}: exit status {code} (a signal if negative):\n{text}"
    assert len(errors) == 1, f"run {run}: expected exactly one error line, got {len(errors)}:\n{text}"
    t_error, line = errors[0]
    assert line.startswith("error: "), f"run {run}: {line}"
    assert "config.json" in line and "attention_bias" in line, f"run {run}: the error must name the file and key: {line}"
    # From the start: the error is printed on the way out, so a slow teardown would delay the line too (the
    # HTTP front starting its workers held every start-up error for 0.5 s on a loaded machine).
    assert exited - started <= EXIT_WITHIN_S, f"run {run}: exited {exited - started:.2f} s after it started"
    assert t_error - started <= EXIT_WITHIN_S, f"run {run}: error line {t_error - started:.2f} s after the start"
    return statuses, len(connected), exited - started


def sigterm_while_loading(bin_dir, work_dir):
    """tokenizer.json is a FIFO nobody writes: loading blocks on it (as on a stalled network filesystem) for
    as long as the test likes, so SIGTERM surely lands while the model is loading."""
    src = make_checkpoint(bin_dir, work_dir, "tiny-ok")
    model = os.path.join(work_dir, "tiny-stalled")
    shutil.rmtree(model, ignore_errors=True)
    shutil.copytree(src, model)
    os.remove(os.path.join(model, "tokenizer.json"))
    os.mkfifo(os.path.join(model, "tokenizer.json"))
    port = free_port()
    proc = start(bin_dir, model, port)
    lines = []
    reader = threading.Thread(target=read_lines, args=(proc, lines))
    reader.start()
    try:
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline and status != 503:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
                conn.request("GET", "/health")
                r = conn.getresponse()
                status, body = r.status, json.loads(r.read())
                conn.close()
            except (OSError, http.client.HTTPException):
                time.sleep(0.02)
        assert status == 503 and body["status"] == "loading", f"health during loading: {status}"
        time.sleep(0.2)
        assert proc.poll() is None, "the server should still be loading (blocked on the FIFO)"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join()
    text = "\n".join(l for _, l in lines)
    assert code == 0, f"SIGTERM while loading: exit status {code}:\n{text}"
    assert took <= EXIT_WITHIN_S, f"SIGTERM while loading: exited after {took:.2f} s"
    assert "while loading" in text, text
    print(f"SIGTERM while loading: exited {took * 1000:.0f} ms after the signal, status 0")


def run_to_exit(bin_dir, model, port, env=None):
    """Starts the server and waits for it to end (killed after 10 s): (status, stderr, seconds taken)."""
    t0 = time.monotonic()
    proc = start(bin_dir, model, port, env=env)
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, time.monotonic() - t0


def port_in_use(bin_dir, model):
    """Another process listens on the port: one error line naming the address and the reason, non-zero
    status, within a second (before any model loading)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        status, err, took = run_to_exit(bin_dir, model, port)
    errors = [l for l in err.splitlines() if "error" in l.lower()]
    assert status != 0, f"port in use: exit status 0:\n{err}"
    assert len(errors) == 1, f"port in use: expected one error line:\n{err}"
    assert errors[0].startswith("error: ") and f"127.0.0.1:{port}" in errors[0] and "in use" in errors[0], errors[0]
    assert took <= EXIT_WITHIN_S, f"port in use: exited after {took:.2f} s"
    print(f"port in use: '{errors[0]}', status {status}, {took * 1000:.0f} ms")


def bad_kernel_settings(bin_dir, model):
    """A misspelt SPARK_FORCE_ISA or SPARK_DISABLE_CPU_FEATURES: one error line naming the variable,
    non-zero status, within a second, before the server listens or loads anything; the same for
    `spark-server generate` (before it reads the checkpoint: no `loaded` line)."""
    for name, value in (("SPARK_FORCE_ISA", "avx3"), ("SPARK_DISABLE_CPU_FEATURES", "avx_vnni,avx-vnni")):
        # Only the misspelt variable: the other one, valid or not, must not decide the outcome.
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_FORCE_ISA", "SPARK_DISABLE_CPU_FEATURES")}
        env[name] = value
        status, err, took = run_to_exit(bin_dir, model, free_port(), env=env)
        t0 = time.monotonic()
        gen = subprocess.run([os.path.join(bin_dir, "spark-server"), "generate", "--model", model, "--prompt-ids",
                              "14,15", "-n", "1", "-t", "1"], env=env, capture_output=True, text=True, timeout=60)
        gen_took = time.monotonic() - t0
        for mode, code, text, seconds in (("serve", status, err, took), ("generate", gen.returncode, gen.stderr,
                                                                          gen_took)):
            assert code != 0, f"{mode}, {name}={value}: exit status 0:\n{text}"
            lines = [l for l in text.splitlines() if l.strip()]
            assert len(lines) == 1 and lines[0].startswith(f"error: {name}"), \
                f"{mode}, {name}={value}: expected one error line:\n{text}"
            assert seconds <= EXIT_WITHIN_S, f"{mode}, {name}={value}: exited after {seconds:.2f} s"
            print(f"{mode}, {name}={value}: '{lines[0]}', status {code}, {seconds * 1000:.0f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)

    src = make_checkpoint(args.bin_dir, args.work_dir, "tiny-ok")
    port_in_use(args.bin_dir, src)
    bad_kernel_settings(args.bin_dir, src)
    broken = os.path.join(args.work_dir, "tiny-attention-bias")
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(src, broken)
    cfg_path = os.path.join(broken, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["attention_bias"] = True
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)

    answered = connections = 0
    slowest = 0.0
    for run in range(RUNS):
        statuses, connected, took = broken_config_run(args.bin_dir, broken, run)
        answered += len(statuses)
        connections += connected
        slowest = max(slowest, took)
        assert all(s == 503 for s in statuses), f"run {run}: /health answered {statuses} while failing to load"
    # The poller must have reached the server in some runs, or the runs say nothing about a polled server.
    assert connections > 0, "the /health poller never connected while the server was up"
    print(f"{RUNS} runs on a refused config.json: each exited non-zero within {EXIT_WITHIN_S} s of its start "
          f"(slowest {slowest:.2f} s) with one error line; the poller connected {connections} times, "
          f"{answered} /health answers, all 503")
    sigterm_while_loading(args.bin_dir, args.work_dir)
    shutil.rmtree(os.path.join(args.work_dir, "tiny-stalled"), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
