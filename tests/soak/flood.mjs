// Connection flood against a fresh spark-server (demo checkpoint, loopback): N simultaneous connections, a
// third idle keep-alives (one /health, then silent), a third slow senders (a request dribbled one byte
// every 200 ms, never finished in time), a third real requests (completions, streamed chat, /health,
// /v1/models; two per connection, the second on the kept-alive connection). Raw sockets, so the time from
// a request's last byte to the first byte of its answer is measured exactly.
//
//   node tests/soak/flood.mjs --bin build/bin --connections 1000 [--server-args "--request-read-timeout 5"]
//
// Pass (exit 0): every real request answered (200, or 429 / 503 beyond capacity) within 2 s of being sent,
// no connection reset or left unanswered, every slow sender answered 408 or closed by the server within
// its read timeout + 2 s (or 503 at the connection cap), the server alive and healthy after the flood, RssAnon growth bounded, SIGTERM
// exit 0.
import { spawn } from 'node:child_process';
import { readFileSync, mkdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startSpark } from './server.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  // --server-args takes the next word as is (it holds the server's own --flags).
  const takes = a === '--server-args' || (all[i + 1] && !all[i + 1].startsWith('--'));
  if (a.startsWith('--') && all[i - 1] !== '--server-args') acc.push([a.slice(2), takes ? all[i + 1] ?? '' : 'true']);
  return acc;
}, []));
const BIN = path.resolve(args.bin ?? 'build/bin');
const N = Number(args.connections ?? 1000);
const SERVER_ARGS = (args['server-args'] ?? '').split(' ').filter(Boolean);
const READ_TIMEOUT_S = Number(SERVER_ARGS[SERVER_ARGS.indexOf('--request-read-timeout') + 1] ?? 10) || 10;
const ANSWER_MS = 2000;
const RSS_GROWTH_MIB = Number(args['max-rss-growth-mib'] ?? 256);

function procStatus(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (k) => Number((s.match(new RegExp(`${k}:\\s+(\\d+) kB`)) ?? [0, NaN])[1]);
  return { rssAnon: kib('RssAnon'), hwm: kib('VmHWM'), threads: Number((s.match(/Threads:\s+(\d+)/) ?? [0, NaN])[1]) };
}

function startServer() {
  return startSpark(BIN, ['--threads', '2', '--max-num-seqs', '16', '--max-queued-requests', '32',
    '--kv-cache-memory-bytes', String(256 << 20), ...SERVER_ARGS], { logBytes: 100000 });
}

// One connection that can carry several requests; resolves each with {status, ttfbMs, totalMs}.
class Client {
  constructor(port) {
    this.sock = net.connect(port, '127.0.0.1');
    this.buf = Buffer.alloc(0);
    this.waiter = null;
    this.closed = false;
    this.error = null;
    this.ready = new Promise((resolve) => { this.sock.once('connect', resolve); this.sock.once('error', resolve); });
    this.sock.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.poke(); });
    this.sock.on('error', (e) => { this.error = e.code ?? e.message; });
    this.sock.on('close', () => { this.closed = true; this.poke(); });
  }
  poke() { if (this.waiter) this.waiter(); }
  // Sends `raw` and waits for one whole response (Content-Length or chunked).
  async send(raw, timeoutMs = 60000) {
    const t0 = performance.now();
    let ttfb = null;
    this.sock.write(raw);
    const deadline = t0 + timeoutMs;
    for (;;) {
      if (ttfb === null && this.buf.length > 0) ttfb = performance.now() - t0;
      const r = parseResponse(this.buf);
      if (r) {
        this.buf = this.buf.subarray(r.length);
        return { status: r.status, close: r.close, ttfbMs: ttfb, totalMs: performance.now() - t0 };
      }
      if (this.closed) return { status: this.error ? `reset (${this.error})` : 'closed without an answer', ttfbMs: ttfb, totalMs: performance.now() - t0 };
      if (performance.now() > deadline) return { status: 'no answer', ttfbMs: ttfb, totalMs: performance.now() - t0 };
      await new Promise((resolve) => { this.waiter = resolve; setTimeout(resolve, 100); });
      this.waiter = null;
    }
  }
  destroy() { this.sock.destroy(); }
}

// A complete HTTP/1.1 response at the start of `buf` (skipping 1xx), or null.
function parseResponse(buf) {
  let off = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', off);
    if (end < 0) return null;
    const head = buf.subarray(off, end).toString('latin1');
    const status = Number(head.slice(9, 12));
    let pos = end + 4;
    if (status >= 100 && status < 200) { off = pos; continue; }
    const cl = head.match(/\r\ncontent-length:\s*(\d+)/i);
    const close = /\r\nconnection:\s*close/i.test(head);
    if (cl) return buf.length >= pos + Number(cl[1]) ? { status, close, length: pos + Number(cl[1]) } : null;
    if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
      for (;;) {
        const eol = buf.indexOf('\r\n', pos);
        if (eol < 0) return null;
        const size = parseInt(buf.subarray(pos, eol).toString('latin1'), 16);
        if (size === 0) return buf.length >= eol + 4 ? { status, close, length: eol + 4 } : null;
        pos = eol + 2 + size + 2;
        if (buf.length < pos) return null;
      }
    }
    return { status, close, length: pos };
  }
}

function request(port, raw) {
  const c = new Client(port);
  return c.ready.then(() => c.send(raw, 5000)).finally(() => c.destroy());
}

const post = (p, body) => {
  const b = JSON.stringify(body);
  return `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
};
const REAL = [
  () => post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 4 }),
  () => post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true }),
  () => 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n',
  () => 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n',
];

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };

async function main() {
  const server = await startServer();
  const { proc, port } = server;
  const base = procStatus(proc.pid);
  let peak = base.rssAnon;
  let peakThreads = base.threads;
  const sampler = setInterval(() => {
    try { const s = procStatus(proc.pid); peak = Math.max(peak, s.rssAnon); peakThreads = Math.max(peakThreads, s.threads); } catch { /* exited */ }
  }, 100);
  const tFlood = performance.now();
  const nIdle = Math.floor(N / 3), nSlow = Math.floor(N / 3), nReal = N - nIdle - nSlow;

  // Idle keep-alives: one request each, then silence.
  const idle = Array.from({ length: nIdle }, () => new Client(port));
  const idleFirst = await Promise.all(idle.map(async (c) => { await c.ready; return c.send('GET /health HTTP/1.1\r\nHost: x\r\n\r\n', 10000); }));
  // Slow senders: a request that would take 100 bytes * 200 ms = 20 s, longer than the read timeout.
  const slowBody = JSON.stringify({ prompt: 'x'.repeat(20), max_tokens: 1 });
  const slowRaw = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${slowBody.length}\r\n\r\n${slowBody}`;
  const slow = Array.from({ length: nSlow }, () => new Client(port));
  const slowResults = slow.map(async (c) => {
    await c.ready;
    const t0 = performance.now();
    let i = 0;
    const iv = setInterval(() => { if (i < slowRaw.length && !c.closed) c.sock.write(slowRaw[i++]); else clearInterval(iv); }, 200);
    const r = await c.send('', (READ_TIMEOUT_S + 10) * 1000);
    clearInterval(iv);
    return { ...r, sinceStartMs: performance.now() - t0 };
  });
  await new Promise((r) => setTimeout(r, 500));  // the slow senders are mid-request
  // Real requests, all at once, two per connection.
  const real = Array.from({ length: nReal }, () => new Client(port));
  const realResults = (await Promise.all(real.map(async (c, i) => {
    await c.ready;
    const first = await c.send(REAL[i % REAL.length]());
    const out = [{ kind: i % REAL.length, ...first }];
    if (typeof first.status === 'number' && !first.close && !c.closed) out.push({ kind: (i + 1) % REAL.length, ...(await c.send(REAL[(i + 1) % REAL.length]())) });
    return out;
  }))).flat();
  const realDoneMs = performance.now() - tFlood;
  const slowDone = await Promise.all(slowResults);
  const floodMs = performance.now() - tFlood;
  const idleStillOpen = idle.filter((c) => !c.closed).length;
  for (const c of [...idle, ...slow, ...real]) c.destroy();

  const health = await request(port, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n').catch((e) => ({ status: e.message }));
  clearInterval(sampler);
  const end = procStatus(proc.pid);
  const alive = proc.exitCode === null;
  proc.kill('SIGTERM');
  const exitCode = await new Promise((r) => (proc.exitCode !== null ? r(proc.exitCode) : proc.on('exit', (c, s) => r(c ?? s))));

  const byStatus = {};
  for (const r of realResults) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
  const slowByStatus = {};
  for (const r of slowDone) slowByStatus[r.status] = (slowByStatus[r.status] ?? 0) + 1;
  const answered = realResults.filter((r) => [200, 429, 503].includes(r.status));
  const late = realResults.filter((r) => !(r.ttfbMs <= ANSWER_MS));
  const ttfb = realResults.map((r) => r.ttfbMs ?? Infinity);
  const slowLate = slowDone.filter((r) => !(r.sinceStartMs <= (READ_TIMEOUT_S + 2) * 1000) || !(r.status === 408 || r.status === 503 || r.status === 'closed without an answer'));
  const mib = (k) => (k / 1024).toFixed(1);
  console.log(`flood: ${N} connections (${nIdle} idle keep-alive, ${nSlow} slow senders, ${nReal} real connections ` +
    `x 2 requests) on ${os.cpus()[0].model}, ${os.cpus().length} CPUs, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`idle keep-alives: first request ${JSON.stringify(idleFirst.reduce((a, r) => ({ ...a, [r.status]: (a[r.status] ?? 0) + 1 }), {}))}, ` +
    `still open at the end ${idleStillOpen}`);
  console.log(`real requests: ${realResults.length}, statuses ${JSON.stringify(byStatus)}; time to first answer byte p50 ` +
    `${pct(ttfb, 0.5).toFixed(0)} ms, p99 ${pct(ttfb, 0.99).toFixed(0)} ms, max ${Math.max(...ttfb).toFixed(0)} ms; whole answer p99 ` +
    `${pct(realResults.map((r) => r.totalMs), 0.99).toFixed(0)} ms; all real requests done after ${(realDoneMs / 1000).toFixed(1)} s`);
  console.log(`slow senders: ${JSON.stringify(slowByStatus)}, answered after p50 ${(pct(slowDone.map((r) => r.sinceStartMs), 0.5) / 1000).toFixed(1)} s, ` +
    `max ${(Math.max(...slowDone.map((r) => r.sinceStartMs)) / 1000).toFixed(1)} s (read timeout ${READ_TIMEOUT_S} s)`);
  console.log(`server RssAnon: ${mib(base.rssAnon)} MiB before, peak ${mib(peak)} MiB, ${mib(end.rssAnon)} MiB after; VmHWM ${mib(end.hwm)} MiB; ` +
    `threads ${base.threads} before, peak ${peakThreads}; flood took ${(floodMs / 1000).toFixed(1)} s`);
  const checks = [
    [`every real request answered 200/429/503 (${answered.length} of ${realResults.length})`, answered.length === realResults.length],
    [`every real answer began within ${ANSWER_MS} ms of the request (late: ${late.length})`, late.length === 0],
    [`every slow sender got 408 (503 at the connection cap) or a close within the read timeout + 2 s (not: ${slowLate.length})`, slowLate.length === 0],
    ['server alive after the flood', alive],
    ['/health 200 after the flood', health.status === 200],
    [`RssAnon growth under ${RSS_GROWTH_MIB} MiB`, peak - base.rssAnon < RSS_GROWTH_MIB * 1024],
    ['SIGTERM exit code 0', exitCode === 0],
  ];
  for (const [c, ok] of checks) console.log(`${ok ? 'pass' : 'FAIL'}: ${c}`);
  if (late.length) console.log("late or unanswered:", JSON.stringify(late.slice(0, 10)));
  const bad = realResults.filter((r) => ![200, 429, 503].includes(r.status));
  if (bad.length) console.log("unanswered:", JSON.stringify(bad.slice(0, 10)));
  if (checks.some(([, ok]) => !ok)) {
    console.log('server log tail:\n' + server.log().slice(-3000));
    process.exit(1);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
