// Starts the real spark-server binary on 127.0.0.1 (any free port) over a generated checkpoint, and
// gives tests an OpenAI client pointed at it.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';

export const BIN_DIR = process.env.SPARK_BIN_DIR;
export const WORK_DIR = process.env.SPARK_WORK_DIR;
if (!BIN_DIR || !WORK_DIR) throw new Error('SPARK_BIN_DIR and SPARK_WORK_DIR must be set (ctest sets them)');

export function checkpoint(preset = 'tiny', seed = 3) {
  const dir = path.join(WORK_DIR, `${preset}-${seed}`);
  if (!existsSync(path.join(dir, 'model.safetensors'))) {
    mkdirSync(WORK_DIR, { recursive: true });
    execFileSync(path.join(BIN_DIR, 'spark-make-checkpoint'), ['--preset', preset, '--seed', String(seed), '-o', dir]);
  }
  return dir;
}

export async function startServer(extraArgs = [], { preset = 'tiny', env = {} } = {}) {
  const model = checkpoint(preset);
  const args = ['--model', model, '--port', '0', '--threads', '2', '--kv-cache-memory-bytes', String(64 << 20),
                '--served-model-name', 'spark-test', ...extraArgs];
  const proc = spawn(path.join(BIN_DIR, 'spark-server'), args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60000);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
  proc.stderr.removeAllListeners('data');
  proc.stderr.on('data', (d) => { log += d.toString(); });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; ++i) {
    try {
      const r = await fetch(`${url}/health`);
      if (r.status === 200) break;
    } catch { /* not accepting yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    port,
    proc,
    log: () => log,
    client: (opts = {}) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, ...opts }),
    async metrics() {
      const text = await (await fetch(`${url}/metrics`)).text();
      const values = {};
      for (const line of text.split('\n')) {
        const m = line.match(/^([a-z_]+(?:\{[^}]*\})?) ([-0-9.e+]+)$/);
        if (m) values[m[1]] = Number(m[2]);
      }
      return values;
    },
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      return await new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
    },
  };
}

export async function postJson(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text, headers: r.headers };
}
