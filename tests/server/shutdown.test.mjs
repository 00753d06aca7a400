// Graceful shutdown on SIGTERM: the listener closes at once (new connections are refused, /health says 503
// on a connection that was already open), a stream in flight runs to completion, the process exits 0;
// --shutdown-timeout ends what is still running with a final SSE error event; a second signal exits at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { startServer } from './lib.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const messages = [{ role: 'user', content: 'Tell me a long story.' }];

function exitOf(proc) {
  if (proc.exitCode !== null) return Promise.resolve(proc.exitCode);
  return new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
}

// Resolves 'refused' or 'accepted' for a fresh TCP connection.
function tryConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve('accepted'); });
    s.once('error', (e) => resolve(e.code === 'ECONNREFUSED' ? 'refused' : e.code));
  });
}

function getHealth(port, agent) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/health', agent }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body, socket: req.reusedSocket }));
    });
    req.on('error', reject);
  });
}

async function waitForLog(server, re, what) {
  for (let i = 0; i < 250; ++i) {
    if (re.test(server.log())) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}:\n${server.log()}`);
}

test('SIGTERM: the stream in flight completes, new connections are refused, exit status 0', async () => {
  const server = await startServer();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    assert.equal((await getHealth(server.port, agent)).status, 200);  // leaves a keep-alive connection open
    const maxTokens = 500;
    const stream = await server.client().chat.completions.create({
      model: 'spark-test', messages, max_tokens: maxTokens, ignore_eos: true, stream: true,
      stream_options: { include_usage: true },
    });
    const it = stream[Symbol.asyncIterator]();
    const chunks = [(await it.next()).value];
    const exited = exitOf(server.proc);
    server.proc.kill('SIGTERM');
    await waitForLog(server, /shutting down/, 'the shutdown to begin');
    assert.match(server.log(), /waiting up to 30 s for 1 request\(s\) in flight/, 'the stream was in flight');
    assert.equal(await tryConnect(server.port), 'refused', 'a new connection after SIGTERM');
    const health = await getHealth(server.port, agent);
    assert.ok(health.socket, 'the health check reused the open connection');
    assert.equal(health.status, 503);
    assert.equal(JSON.parse(health.body).status, 'draining');
    for (let r = await it.next(); !r.done; r = await it.next()) chunks.push(r.value);
    const last = chunks[chunks.length - 1];
    assert.equal(last.usage.completion_tokens, maxTokens, 'the stream ran to the end');
    assert.equal(chunks[chunks.length - 2].choices[0].finish_reason, 'length');
    assert.equal(await exited, 0, server.log());
  } finally {
    agent.destroy();
    await server.stop();
  }
});

test('--shutdown-timeout cancels what is still running with a final SSE error event, exit status 0', async () => {
  const server = await startServer(['--shutdown-timeout', '0.3']);
  try {
    const stream = await server.client().chat.completions.create({
      model: 'spark-test', messages, max_tokens: 30000, ignore_eos: true, stream: true,
    });
    const it = stream[Symbol.asyncIterator]();
    let received = 1;
    await it.next();
    const exited = exitOf(server.proc);
    server.proc.kill('SIGTERM');
    await assert.rejects(
      (async () => { for (let r = await it.next(); !r.done; r = await it.next()) ++received; })(),
      (e) => /shut down before the request finished/.test(e.message),
    );
    assert.ok(received < 30000, `received ${received} chunks`);
    assert.equal(await exited, 0, server.log());
    assert.match(server.log(), /shutdown timeout: cancelling 1 request/);
  } finally {
    await server.stop();
  }
});

test('a second SIGTERM during the drain exits at once', async () => {
  const server = await startServer(['--shutdown-timeout', '600']);
  try {
    const stream = await server.client().chat.completions.create({
      model: 'spark-test', messages, max_tokens: 30000, ignore_eos: true, stream: true,
    });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    const exited = exitOf(server.proc);
    server.proc.kill('SIGTERM');
    await waitForLog(server, /waiting up to 600 s/, 'the drain to begin');
    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    assert.equal(await exited, 128 + 15, server.log());
    assert.ok(Date.now() - t0 < 2000, `exit took ${Date.now() - t0} ms`);
    await assert.rejects((async () => { for (let r = await it.next(); !r.done; r = await it.next()); })());
  } finally {
    await server.stop();
  }
});
