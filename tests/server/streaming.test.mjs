// Server-sent events: chunk shapes, [DONE], the usage chunk only when include_usage asks for it, and
// streamed text identical to the non-streamed answer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => { await server.stop(); });

const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Count to five.' }];

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

test('streamed deltas concatenate to the non-streamed message', async () => {
  const req = { model: 'spark-test', messages, max_tokens: 30, temperature: 0, ignore_eos: true };
  const whole = await client.chat.completions.create(req);
  const chunks = await collect(await client.chat.completions.create({ ...req, stream: true }));
  let content = '', reasoning = '';
  let finish = null;
  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.id, chunks[0].id);
    assert.equal(c.choices.length, 1);
    const d = c.choices[0].delta;
    content += d.content ?? '';
    reasoning += d.reasoning_content ?? '';
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(content, whole.choices[0].message.content ?? '');
  assert.equal(reasoning, whole.choices[0].message.reasoning_content ?? '');
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.ok(!chunks.some((c) => c.usage), 'no usage chunk unless asked');
});

test('include_usage adds one final chunk with usage and no choices', async () => {
  const chunks = await collect(await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 8, ignore_eos: true, stream: true, stream_options: { include_usage: true },
  }));
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 8);
  assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + 8);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
});

test('include_usage false behaves like no stream_options', async () => {
  const chunks = await collect(await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 4, stream: true, stream_options: { include_usage: false },
  }));
  assert.ok(!chunks.some((c) => c.usage));
});

test('the raw stream ends with data: [DONE] and every event is data: JSON', async () => {
  const r = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'spark-test', messages, max_tokens: 5, stream: true }),
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const text = await r.text();
  const events = text.split('\n\n').filter((e) => e.length > 0);
  assert.equal(events[events.length - 1], 'data: [DONE]');
  for (const e of events.slice(0, -1)) {
    assert.ok(e.startsWith('data: '), e);
    JSON.parse(e.slice(6));
  }
});

test('streamed n=2 choices each end with their own finish_reason', async () => {
  const chunks = await collect(await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 6, n: 2, seed: 5, ignore_eos: true, stream: true,
  }));
  const finished = chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0].index).sort();
  assert.deepEqual(finished, [0, 1]);
});

test('streamed completions concatenate to the non-streamed text', async () => {
  const req = { model: 'spark-test', prompt: 'Once upon a time', max_tokens: 20, temperature: 0, ignore_eos: true };
  const whole = await client.completions.create(req);
  let text = '';
  for await (const c of await client.completions.create({ ...req, stream: true })) text += c.choices[0]?.text ?? '';
  assert.equal(text, whole.choices[0].text);
});
