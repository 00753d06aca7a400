// Starts the spark-server under test for the soak and flood scripts (they run outside ctest's build dir, so
// not through tests/server/lib.mjs): port 0, stderr kept (its tail goes in failure reports), ready once
// /health answers 200.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export async function startSpark(bin, argv, { logBytes = 200000 } = {}) {
  const cache = path.join(os.tmpdir(), `spark-soak-cache-${process.pid}`);
  mkdirSync(cache, { recursive: true });
  const proc = spawn(path.join(bin, 'spark-server'), ['--port', '0', ...argv], {
    stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SPARK_CACHE_DIR: process.env.SPARK_CACHE_DIR ?? cache },
  });
  let log = '';
  proc.stderr.on('data', (d) => { log = (log + d.toString()).slice(-logBytes); });
  const port = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('server did not start:\n' + log)), 120000);
    const iv = setInterval(() => {
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearInterval(iv); clearTimeout(t); resolve(Number(m[1])); }
    }, 20);
    proc.on('exit', (c) => { clearInterval(iv); clearTimeout(t); reject(new Error(`server exited ${c}:\n${log}`)); });
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; ++i) {
    try { if ((await fetch(`${url}/health`)).status === 200) break; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, url, port, log: () => log };
}
