// Graceful shutdown on SIGTERM: the listener closes at once (new connections are refused, /health says 503
// on a connection that was already open), a stream in flight (here: queued) runs to completion, the process
// exits 0;
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

// Polls the server's log for `re`; the minute is only there to turn a hang into a failure.
async function waitForLog(server, re, what) {
  for (const deadline = Date.now() + 60000; Date.now() < deadline; await sleep(20)) {
    if (re.test(server.log())) return;
  }
  throw new Error(`timed out waiting for ${what}:\n${server.log()}`);
}

test('SIGTERM: the stream in flight completes, new connections are refused, exit status 0', async () => {
  // One sequence at a time: the stream that must complete waits in the queue behind a long one, so it is in
  // flight, and unfinished, at SIGTERM however slowly this process gets there. Closing the long one's stream
  // then cancels it, and the queued stream runs to its end during the drain.
  const server = await startServer(['--max-num-seqs', '1', '--shutdown-timeout', '600']);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    assert.equal((await getHealth(server.port, agent)).status, 200);  // leaves a keep-alive connection open
    const blocker = new AbortController();
    const long = await server.client().chat.completions.create({
      model: 'spark-test', messages, max_tokens: 30000, ignore_eos: true, stream: true,
    }, { signal: blocker.signal });
    const longIt = long[Symbol.asyncIterator]();
    await longIt.next();
    const maxTokens = 500;
    const queued = server.client().chat.completions.create({
      model: 'spark-test', messages, max_tokens: maxTokens, ignore_eos: true, stream: true,
      stream_options: { include_usage: true },
    });
    for (const deadline = Date.now() + 60000; (await server.metrics()).spark_num_requests_waiting !== 1;) {
      assert.ok(Date.now() < deadline, 'the second stream never queued');
      await sleep(20);
    }
    const exited = exitOf(server.proc);
    server.proc.kill('SIGTERM');
    // The signal thread logs "shutting down" first; the drain logs this line once the listener is closed, so
    // only after it are refused connections and a 503 /health guaranteed.
    await waitForLog(server, /not accepting connections; waiting up to 600 s for 2 request\(s\) in flight/,
      'the drain to begin with both streams in flight');
    assert.equal(await tryConnect(server.port), 'refused', 'a new connection after SIGTERM');
    const health = await getHealth(server.port, agent);
    assert.ok(health.socket, 'the health check reused the open connection');
    assert.equal(health.status, 503);
    assert.equal(JSON.parse(health.body).status, 'draining');
    // The long stream's client goes away (the SDK ends an aborted stream quietly): the server cancels it.
    blocker.abort();
    try { for (let r = await longIt.next(); !r.done; r = await longIt.next()); } catch { /* aborted */ }
    const chunks = [];
    for await (const chunk of await queued) chunks.push(chunk);
    const last = chunks[chunks.length - 1];
    assert.equal(last.usage.completion_tokens, maxTokens, 'the queued stream ran to the end');
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

for (const [second, number] of [['SIGTERM', 15], ['SIGINT', 2]]) {
  test(`a second signal (${second}) during the drain exits at once`, async () => {
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
      server.proc.kill(second);
      // 128 + the signal's number is the second signal's exit: a drain that ran to its end would exit 0. "At
      // once" against the 600 s the drain would wait: a bound far above a signal's delivery and _exit,
      // however loaded the machine.
      assert.equal(await exited, 128 + number, server.log());
      assert.ok(Date.now() - t0 < 30000, `exit took ${Date.now() - t0} ms`);
      await assert.rejects((async () => { for (let r = await it.next(); !r.done; r = await it.next()); })());
    } finally {
      await server.stop();
    }
  });
}
