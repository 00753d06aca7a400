// The server's side of running as one replica behind a load balancer (deploy/): every response names the
// replica (X-Served-By), /health says ready with 200, and the session key (X-Session-Id, else `user`) is
// counted by source in /metrics without changing how the request is served.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { startServer, postJson } from './lib.mjs';

const chat = (extra = {}) => ({ model: 'spark-test', max_tokens: 2, temperature: 0,
                                messages: [{ role: 'user', content: 'Hi' }], ...extra });

test('--served-by names the replica on every response, errors and streams included', async () => {
  const server = await startServer(['--served-by', 'edge-a']);
  try {
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    assert.equal(health.headers.get('x-served-by'), 'edge-a');
    assert.deepEqual(await health.json(), { status: 'ready', served_by: 'edge-a' });
    for (const path of ['/v1/models', '/metrics', '/no/such/route']) {
      const r = await fetch(`${server.url}${path}`);
      await r.text();
      assert.equal(r.headers.get('x-served-by'), 'edge-a', path);
    }
    const bad = await postJson(`${server.url}/v1/chat/completions`, { model: 'spark-test' });
    assert.equal(bad.status, 400);
    assert.equal(bad.headers.get('x-served-by'), 'edge-a');
    const ok = await postJson(`${server.url}/v1/chat/completions`, chat());
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('x-served-by'), 'edge-a');
    const stream = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(chat({ stream: true })),
    });
    assert.equal(stream.headers.get('x-served-by'), 'edge-a');
    assert.match(await stream.text(), /data: \[DONE\]/);
  } finally {
    await server.stop();
  }
});

test('without --served-by the replica is hostname:port', async () => {
  const server = await startServer();
  try {
    const r = await fetch(`${server.url}/health`);
    assert.equal(r.headers.get('x-served-by'), `${os.hostname()}:${server.port}`);
  } finally {
    await server.stop();
  }
});

test('the session key is counted by source and does not change the answer', async () => {
  const server = await startServer();
  try {
    const plain = await postJson(`${server.url}/v1/chat/completions`, chat());
    const header = await postJson(`${server.url}/v1/chat/completions`, chat(), { 'X-Session-Id': 'conv-1' });
    const user = await postJson(`${server.url}/v1/chat/completions`, chat({ user: 'alice' }));
    const completion = await postJson(`${server.url}/v1/completions`,
                                      { model: 'spark-test', prompt: 'Hi', max_tokens: 2 }, { 'X-Session-Id': 'c' });
    for (const r of [plain, header, user, completion]) assert.equal(r.status, 200, r.text);
    assert.equal(header.json.choices[0].message.content, plain.json.choices[0].message.content);
    assert.equal(user.json.choices[0].message.content, plain.json.choices[0].message.content);
    const m = await server.metrics();
    assert.equal(m['spark_session_key_requests_total{source="header"}'], 2);
    assert.equal(m['spark_session_key_requests_total{source="user"}'], 1);
    assert.equal(m['spark_session_key_requests_total{source="none"}'], 1);
  } finally {
    await server.stop();
  }
});
