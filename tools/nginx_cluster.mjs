// Starts spark-server replicas and Debian's nginx in front of them, configured from
// deploy/nginx/spark-server.conf (only the replica list and listen port rewritten), all on loopback and
// without root: every nginx path (pid, logs, temp files) lies under a prefix folder. Used by
// tests/deploy/nginx_replicas.mjs and tools/scale-bench.mjs.
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export function exited(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve(proc.exitCode ?? proc.signalCode);
  return new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
}

// `extra` holds further server flags (--threads, --kv-cache-memory-bytes, ...); `cpus` a taskset core list.
export async function startReplica({ bin, model, name, extra = [], cpus = null }) {
  const argv = ['--model', model, '--port', '0', '--served-model-name', 'spark-test', '--served-by', name, ...extra];
  const exe = path.join(bin, 'spark-server');
  const proc = cpus ? spawn('taskset', ['-c', cpus, exe, ...argv], { stdio: ['ignore', 'ignore', 'pipe'] })
                    : spawn(exe, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d.toString(); });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${log}`)), 60000);
    const poll = setInterval(() => {
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearInterval(poll); clearTimeout(timer); resolve(Number(m[1])); }
    }, 20);
    proc.on('exit', (code) => { clearInterval(poll); clearTimeout(timer); reject(new Error(`${name} exited ${code}:\n${log}`)); });
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; ++i) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) break;
    } catch { /* not accepting yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { name, port, url, proc, log: () => log };
}

// The deploy template with this run's replicas and port, inside a minimal nginx.conf whose every path
// (pid, logs, temp files) lies under `prefix`: no root, nothing of the system's nginx touched.
// `balance`: 'hash' (the template's session affinity) or 'round-robin' (the hash line dropped), for comparison.
export function writeNginxConf(prefix, port, replicas, { balance = 'hash' } = {}) {
  const template = readFileSync(path.join(ROOT, 'deploy/nginx/spark-server.conf'), 'utf8');
  const servers = replicas.map((r) => `    server 127.0.0.1:${r.port} max_fails=1 fail_timeout=10s;`).join('\n');
  const site = template
    .replace(/# replicas begin\n[\s\S]*?# replicas end/, `# replicas begin\n${servers}\n    # replicas end`)
    .replace(/listen 8000;/, `listen 127.0.0.1:${port};`)
    .replace(/^\s*hash \$spark_session_key consistent;\n/m, balance === 'hash' ? '$&' : '');
  if (!site.includes(`127.0.0.1:${replicas[0].port}`) || !site.includes(`listen 127.0.0.1:${port};`)) {
    throw new Error('deploy/nginx/spark-server.conf lost its "# replicas begin/end" markers or "listen 8000;"');
  }
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(path.join(prefix, 'tmp', d), { recursive: true });
  writeFileSync(path.join(prefix, 'spark-server.conf'), site);
  writeFileSync(path.join(prefix, 'nginx.conf'), `daemon off;
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 512; }
http {
    access_log ${prefix}/access.log;
    client_body_temp_path ${prefix}/tmp/body;
    proxy_temp_path ${prefix}/tmp/proxy;
    fastcgi_temp_path ${prefix}/tmp/fastcgi;
    uwsgi_temp_path ${prefix}/tmp/uwsgi;
    scgi_temp_path ${prefix}/tmp/scgi;
    include ${prefix}/spark-server.conf;
}
`);
}

export async function startNginx(nginxBin, prefix, port) {
  execFileSync(nginxBin, ['-t', '-q', '-p', prefix, '-c', path.join(prefix, 'nginx.conf')], { stdio: 'inherit' });
  const proc = spawn(nginxBin, ['-p', prefix, '-c', path.join(prefix, 'nginx.conf')], { stdio: 'inherit' });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; ++i) {
    try {
      await fetch(`${url}/health`);
      return { proc, url };
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nginx did not listen on ${port}: ${readFileSync(path.join(prefix, 'error.log'), 'utf8')}`);
}
