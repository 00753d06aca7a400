// Bad input gets an OpenAI-shaped error with the right status and loses nothing: after 30+ kinds of
// malformed requests the server still answers a good one. Errors surface as the SDK's typed errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, postJson } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer(['--max-model-len', '256', '--max-body-bytes', String(64 * 1024)]);
  client = server.client();
});
after(async () => { await server.stop(); });

const ok = { model: 'spark-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };

const bad = [
  ['not JSON', '{"model": "spark-test", "messages": [', 400],
  ['a JSON array', '[1, 2, 3]', 400],
  ['empty body', '', 400],
  ['no messages', { model: 'spark-test' }, 400],
  ['messages not a list', { ...ok, messages: 'hi' }, 400],
  ['empty messages', { ...ok, messages: [] }, 400],
  ['message not an object', { ...ok, messages: ['hi'] }, 400],
  ['missing role', { ...ok, messages: [{ content: 'hi' }] }, 400],
  ['unknown role', { ...ok, messages: [{ role: 'wizard', content: 'hi' }] }, 400],
  ['content a number', { ...ok, messages: [{ role: 'user', content: 42 }] }, 400],
  ['image content part', { ...ok, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 400],
  ['user content missing', { ...ok, messages: [{ role: 'user' }] }, 400],
  ['temperature a string', { ...ok, temperature: 'hot' }, 400],
  ['temperature out of range', { ...ok, temperature: 7 }, 400],
  ['top_p zero', { ...ok, top_p: 0 }, 400],
  ['max_tokens zero', { ...ok, max_tokens: 0 }, 400],
  ['max_tokens a float', { ...ok, max_tokens: 2.5 }, 400],
  ['n zero', { ...ok, n: 0 }, 400],
  ['n huge', { ...ok, n: 1000 }, 400],
  ['stream a string', { ...ok, stream: 'yes' }, 400],
  ['stop a number', { ...ok, stop: 5 }, 400],
  ['stop list with a number', { ...ok, stop: ['a', 1] }, 400],
  ['logit_bias with a bad key', { ...ok, logit_bias: { abc: 1 } }, 400],
  ['logit_bias out of range', { ...ok, logit_bias: { '5': 500 } }, 400],
  ['top_logprobs without logprobs', { ...ok, top_logprobs: 3 }, 400],
  ['seed a string', { ...ok, seed: 'x' }, 400],
  ['bad tool_choice string', { ...ok, tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'always' }, 400],
  ['tool_choice without tools', { ...ok, tool_choice: 'required' }, 400],
  ['named tool_choice not in tools', { ...ok, tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }, 400],
  ['tools not a list', { ...ok, tools: { name: 'f' } }, 400],
  ['tool without a name', { ...ok, tools: [{ type: 'function', function: {} }] }, 400],
  ['tool call arguments not JSON', { ...ok, messages: [{ role: 'user', content: 'a' }, { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }] }] }, 400],
  ['prompt longer than the context', { ...ok, messages: [{ role: 'user', content: 'word '.repeat(400) }] }, 400],
  ['max_tokens past the context', { ...ok, max_tokens: 100000 }, 400],
  ['unknown model', { ...ok, model: 'gpt-9' }, 404],
  ['chat_template_kwargs not an object', { ...ok, chat_template_kwargs: 3 }, 400],
  ['stream_options not an object', { ...ok, stream: true, stream_options: 1 }, 400],
];

test('every malformed request gets an OpenAI error with the right status, then a good one succeeds', async () => {
  assert.ok(bad.length >= 30);
  for (const [name, body, status] of bad) {
    const r = await postJson(`${server.url}/v1/chat/completions`, typeof body === 'string' ? body : body);
    assert.equal(r.status, status, `${name}: ${r.text}`);
    assert.equal(typeof r.json?.error?.message, 'string', `${name}: ${r.text}`);
    assert.ok('type' in r.json.error && 'param' in r.json.error && 'code' in r.json.error, name);
  }
  // Invalid UTF-8 inside a JSON string.
  const bytes = Buffer.concat([Buffer.from('{"model":"spark-test","messages":[{"role":"user","content":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]);
  const r = await postJson(`${server.url}/v1/chat/completions`, new Uint8Array(bytes));
  assert.equal(r.status, 400, r.text);
  // A body over --max-body-bytes.
  const big = await postJson(`${server.url}/v1/chat/completions`, { ...ok, messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }] });
  assert.equal(big.status, 413, big.text);
  assert.equal(typeof big.json?.error?.message, 'string');
  const unknownRoute = await postJson(`${server.url}/v1/embeddings`, {});
  assert.equal(unknownRoute.status, 404);
  const good = await client.chat.completions.create(ok);
  assert.equal(good.choices.length, 1);
});

test('errors reach the SDK as its typed errors', async () => {
  await assert.rejects(client.chat.completions.create({ ...ok, temperature: 9 }), OpenAI.BadRequestError);
  await assert.rejects(client.chat.completions.create({ ...ok, model: 'nope' }), OpenAI.NotFoundError);
  await assert.rejects(client.chat.completions.create({ ...ok, max_tokens: 100000 }), (e) => e instanceof OpenAI.BadRequestError && /context length/.test(e.message));
});

test('an API key is enforced on /v1 routes', async () => {
  const guarded = await startServer(['--api-key', 'sekret']);
  try {
    await assert.rejects(guarded.client({ apiKey: 'wrong' }).models.list(), OpenAI.AuthenticationError);
    const r = await guarded.client({ apiKey: 'sekret' }).chat.completions.create(ok);
    assert.equal(r.choices.length, 1);
    assert.equal((await fetch(`${guarded.url}/health`)).status, 200, 'health needs no key');
  } finally {
    await guarded.stop();
  }
});

test('SPARK_API_KEY sets the key too', async () => {
  const guarded = await startServer([], { env: { SPARK_API_KEY: 'fromenv' } });
  try {
    await assert.rejects(guarded.client({ apiKey: 'x' }).models.list(), OpenAI.AuthenticationError);
    assert.equal((await guarded.client({ apiKey: 'fromenv' }).models.list()).data.length, 1);
  } finally {
    await guarded.stop();
  }
});
