// /v1/responses on the wire: the store's flags (--responses-store-max-count evicts the least recently used,
// 0 turns it off), the SSE framing of the typed events, input_items paging, response.failed when the
// shutdown timeout cuts a stream; and the chat-completions fields that came with it (reasoning_effort,
// developer, max_completion_tokens, usage's reasoning_tokens).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson } from './lib.mjs';

const servers = [];
after(async () => { for (const s of servers) await s.stop(); });

async function create(server, body) {
  return postJson(`${server.url}/v1/responses`, { model: 'spark-test', max_output_tokens: 4, reasoning: { effort: 'none' }, ...body });
}

test('--responses-store-max-count 2 keeps the two most recently used', async () => {
  const server = await startServer(['--responses-store-max-count', '2']);
  servers.push(server);
  const ids = [];
  for (let i = 0; i < 2; ++i) ids.push((await create(server, { input: `turn ${i}` })).json.id);
  assert.equal((await fetch(`${server.url}/v1/responses/${ids[0]}`)).status, 200);  // ids[0] used last
  ids.push((await create(server, { input: 'turn 2' })).json.id);
  assert.equal((await fetch(`${server.url}/v1/responses/${ids[1]}`)).status, 404);
  assert.equal((await fetch(`${server.url}/v1/responses/${ids[0]}`)).status, 200);
  const missing = await (await fetch(`${server.url}/v1/responses/${ids[1]}`)).json();
  assert.equal(missing.error.type, 'invalid_request_error');
  const del = await fetch(`${server.url}/v1/responses/${ids[2]}`, { method: 'DELETE' });
  assert.deepEqual(await del.json(), { id: ids[2], object: 'response.deleted', deleted: true });

  // input_items: newest first by default, paged with limit/after.
  const cont = await create(server, { input: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }], previous_response_id: ids[0] });
  assert.equal(cont.status, 200, cont.text);
  const page1 = await (await fetch(`${server.url}/v1/responses/${cont.json.id}/input_items?limit=2`)).json();
  assert.equal(page1.data.length, 2);
  assert.equal(page1.has_more, true);
  assert.equal(page1.data[0].content, 'b');
  const page2 = await (await fetch(`${server.url}/v1/responses/${cont.json.id}/input_items?limit=10&after=${page1.last_id}`)).json();
  assert.equal(page2.has_more, false);
  assert.equal(page2.data.at(-1).content[0].text, 'turn 0');  // the continued history, oldest last
  assert.equal((await fetch(`${server.url}/v1/responses/${cont.json.id}/input_items?limit=0`)).status, 400);
});

test('--responses-store-max-count 0: nothing is stored, continuations are refused', async () => {
  const server = await startServer(['--responses-store-max-count', '0']);
  servers.push(server);
  const r = await create(server, { input: 'x' });
  assert.equal(r.status, 200);
  assert.equal((await fetch(`${server.url}/v1/responses/${r.json.id}`)).status, 404);
  const cont = await create(server, { input: 'y', previous_response_id: r.json.id });
  assert.equal(cont.status, 400);
  assert.equal(cont.json.error.param, 'previous_response_id');

  // Streaming framing: `event: <type>` then `data: {...}` whose type matches, numbered from 0, no [DONE].
  const res = await fetch(`${server.url}/v1/responses`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'spark-test', input: 'hi', stream: true, max_output_tokens: 6, reasoning: { effort: 'none' } }) });
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const blocks = (await res.text()).trim().split('\n\n');
  blocks.forEach((block, i) => {
    const [eventLine, dataLine] = block.split('\n');
    const data = JSON.parse(dataLine.slice('data: '.length));
    assert.equal(eventLine, `event: ${data.type}`);
    assert.equal(data.sequence_number, i);
  });
  const last = JSON.parse(blocks.at(-1).split('\n')[1].slice(6));
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type));
  if (last.type === 'response.incomplete') assert.equal(last.response.incomplete_details.reason, 'max_output_tokens');
});

test('chat completions: reasoning_effort, developer role, max_completion_tokens, reasoning_tokens', async () => {
  if (servers.length === 0) servers.push(await startServer());
  const server = servers[0];
  const base = { model: 'spark-test', messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], seed: 5 };
  const off = await postJson(`${server.url}/v1/chat/completions`, { ...base, reasoning_effort: 'none', max_completion_tokens: 8 });
  assert.equal(off.status, 200, off.text);
  assert.equal(off.json.choices[0].message.reasoning_content, null);
  assert.equal(off.json.usage.completion_tokens_details.reasoning_tokens, 0);
  assert.ok(off.json.usage.completion_tokens <= 8);
  // Thinking on with low effort: the whole short reply is reasoning, and counted as such.
  const on = await postJson(`${server.url}/v1/chat/completions`, { ...base, reasoning_effort: 'low', max_completion_tokens: 8 });
  assert.equal(on.status, 200, on.text);
  assert.equal(typeof on.json.choices[0].message.reasoning_content, 'string');
  assert.ok(on.json.usage.completion_tokens_details.reasoning_tokens > 0);
  assert.ok(on.json.usage.completion_tokens_details.reasoning_tokens <= on.json.usage.completion_tokens);
  const bad = await postJson(`${server.url}/v1/chat/completions`, { ...base, reasoning_effort: 'maximum' });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'reasoning_effort');
  const badParallel = await postJson(`${server.url}/v1/chat/completions`, { ...base, parallel_tool_calls: 'no' });
  assert.equal(badParallel.status, 400);
  assert.equal(badParallel.json.error.param, 'parallel_tool_calls');
});

test('--shutdown-timeout ends a streamed response with response.failed', async () => {
  const server = await startServer(['--shutdown-timeout', '0.3']);
  const res = await fetch(`${server.url}/v1/responses`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'spark-test', input: 'Go on.', stream: true, max_output_tokens: 30000, ignore_eos: true,
      reasoning: { effort: 'none' } }) });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('response.output_text.delta')) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended before any text');
    text += decoder.decode(value, { stream: true });
  }
  const exited = new Promise((resolve) => server.proc.on('exit', (code) => resolve(code)));
  server.proc.kill('SIGTERM');
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
  const events = text.trim().split('\n\n').map((b) => JSON.parse(b.split('\n')[1].slice(6)));
  events.forEach((e, i) => assert.equal(e.sequence_number, i));
  const last = events.at(-1);
  assert.equal(last.type, 'response.failed');
  assert.equal(last.response.status, 'failed');
  assert.equal(last.response.error.code, 'server_error');
  assert.match(last.response.error.message, /shut down before the request finished/);
  assert.ok(last.response.output.length >= 1);  // what was generated before the failure
  assert.equal(await exited, 0);
});
