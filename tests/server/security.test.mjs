// --api-key guards every route but /health: /v1, /tokenize, /detokenize and /metrics (unless
// --metrics-public); a wrong key is one counted 401; prompts reach the log only with --log-requests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, postJson } from './lib.mjs';

const chat = { model: 'spark-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };

async function status(url, { method = 'GET', body, key } = {}) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, text };
}

test('the API key guards /v1, /tokenize, /detokenize and /metrics; /health stays open', async () => {
  const server = await startServer(['--api-key', 'sekret']);
  try {
    const routes = [
      ['GET', '/v1/models', undefined],
      ['POST', '/v1/chat/completions', chat],
      ['POST', '/tokenize', { prompt: 'hello' }],
      ['POST', '/detokenize', { tokens: [5, 6] }],
      ['GET', '/metrics', undefined],
    ];
    for (const [method, path, body] of routes) {
      for (const key of [undefined, 'wrong', 'sekre', 'sekret2']) {
        const r = await status(`${server.url}${path}`, { method, body, key });
        assert.equal(r.status, 401, `${method} ${path} with key ${key}: ${r.text}`);
        const err = JSON.parse(r.text).error;
        assert.equal(err.type, 'authentication_error');
      }
      const ok = await status(`${server.url}${path}`, { method, body, key: 'sekret' });
      assert.equal(ok.status, 200, `${method} ${path} with the key: ${ok.text}`);
    }
    assert.equal((await status(`${server.url}/health`)).status, 200);
    // Unknown routes are guarded too (deny by default), so they reveal nothing without the key.
    assert.equal((await status(`${server.url}/v2/secret`)).status, 401);
    assert.equal((await status(`${server.url}/v2/secret`, { key: 'sekret' })).status, 404);
    // Each refused request is counted once. A response is counted just after it is written, so the last
    // count may trail its answer by a moment: poll until it is there (a minute at most), then it must be
    // exact.
    const want = routes.length * 4 + 1;
    let metrics, counted;
    for (const deadline = Date.now() + 60000; ;) {
      metrics = await status(`${server.url}/metrics`, { key: 'sekret' });
      counted = Number(metrics.text.match(/^spark_http_responses_total\{status="401"\} (\d+)$/m)?.[1]);
      if (counted >= want || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(counted, want, metrics.text);
  } finally {
    await server.stop();
  }
});

// A 401 is answered before the body is read. The connection must stay usable: it used to be closed after
// a keep-alive response, so a client that reused it at once saw 'other side closed'. Two pipelined
// requests make that deterministic: the second is answered only if the connection was kept.
test('a request refused before its body is read keeps its keep-alive connection', async () => {
  const server = await startServer(['--api-key', 'sekret']);
  try {
    const body = JSON.stringify(chat);
    const refused =
      'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const next = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
    const s = net.connect(Number(new URL(server.url).port), '127.0.0.1');
    let got = '';
    let closed = false;
    s.on('data', (d) => (got += d));
    s.on('close', () => (closed = true));
    s.on('error', () => (closed = true));
    s.write(refused + next);
    const statuses = () => [...got.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    for (const deadline = Date.now() + 10000; statuses().length < 2 && !closed && Date.now() < deadline; )
      await new Promise((r) => setTimeout(r, 20));
    s.destroy();
    assert.deepEqual(statuses(), [401, 200], got);
  } finally {
    await server.stop();
  }
});

test('--metrics-public opens /metrics only', async () => {
  const server = await startServer(['--api-key', 'sekret', '--metrics-public']);
  try {
    const r = await status(`${server.url}/metrics`);
    assert.equal(r.status, 200);
    assert.match(r.text, /spark_http_responses_total/);
    assert.equal((await status(`${server.url}/tokenize`, { method: 'POST', body: { prompt: 'x' } })).status, 401);
    assert.equal((await status(`${server.url}/v1/models`)).status, 401);
  } finally {
    await server.stop();
  }
});

test('prompts stay out of the log unless --log-requests', async () => {
  const marker = 'PurpleElephant7731';
  const ask = (server) => Promise.all([
    server.client().chat.completions.create({ ...chat, messages: [{ role: 'user', content: `say ${marker}` }] }),
    postJson(`${server.url}/v1/completions`, { model: 'spark-test', prompt: `x ${marker}`, max_tokens: 1 }),
    postJson(`${server.url}/v1/chat/completions`, { ...chat, temperature: 'hot', messages: [{ role: 'user', content: marker }] }),
  ]);
  const quiet = await startServer();
  try {
    await ask(quiet);
  } finally {
    await quiet.stop();
  }
  assert.ok(!quiet.log().includes(marker), quiet.log());
  const loud = await startServer(['--log-requests']);
  try {
    await ask(loud);
  } finally {
    await loud.stop();
  }
  assert.ok(loud.log().includes(marker), loud.log());
  assert.match(loud.log(), /POST \/v1\/chat\/completions -> 200: \{/);
});
