// The official `openai` client on the Responses API: responses.create with string and item input, a forced
// tool call, a json_schema format (validated with ajv), responses.stream to the final response,
// previous_response_id continuation (served from the prefix cache), retrieve, input_items and delete.
// The model has random weights: structure comes from constrained decoding, so only structure is asserted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import { startServer } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => { await server.stop(); });

const ajv = new Ajv({ strict: false });
const weatherParams = {
  type: 'object',
  properties: { city: { type: 'string' }, unit: { enum: ['C', 'F'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const weatherTool = { type: 'function', name: 'get_weather', description: 'Weather for a city', parameters: weatherParams, strict: true };

function checkUsage(r, maxOutput) {
  const u = r.usage;
  assert.ok(u.input_tokens > 0);
  assert.ok(u.output_tokens > 0 && u.output_tokens <= maxOutput, `output_tokens ${u.output_tokens}`);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(typeof u.input_tokens_details.cached_tokens, 'number');
  assert.ok(u.output_tokens_details.reasoning_tokens <= u.output_tokens);
}

test('string input: a message item, usage, status', async () => {
  const r = await client.responses.create({
    model: 'spark-test', input: 'Say hello.', max_output_tokens: 12, reasoning: { effort: 'none' },
    metadata: { suite: 'clients' }, user: 'tester', temperature: 0.7, top_p: 0.9 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(r.status));
  if (r.status === 'incomplete') assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  const messages = r.output.filter((i) => i.type === 'message');
  assert.equal(messages.length, 1);
  assert.equal(messages[0].role, 'assistant');
  assert.equal(messages[0].content[0].type, 'output_text');
  assert.equal(r.output_text, messages[0].content[0].text);  // the SDK's convenience field
  assert.equal(r.output.filter((i) => i.type === 'reasoning').length, 0);  // effort none: thinking off
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
  assert.deepEqual(r.metadata, { suite: 'clients' });
  assert.equal(r.user, 'tester');
  assert.equal(r.max_output_tokens, 12);
  checkUsage(r, 12);
});

test('item input with instructions, history and reasoning on', async () => {
  const r = await client.responses.create({
    model: 'spark-test',
    instructions: 'You are terse.',
    input: [
      { role: 'developer', content: 'Answer in one word.' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Oslo?' }] },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo","unit":"C"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'rain' },
    ],
    tools: [weatherTool],
    reasoning: { effort: 'low' },
    seed: 13,
    max_output_tokens: 24,
  });
  assert.equal(r.instructions, 'You are terse.');
  assert.equal(r.reasoning.effort, 'low');
  // Thinking on: the output opens with the reasoning item (the <think> text), counted in reasoning_tokens.
  assert.equal(r.output[0].type, 'reasoning');
  assert.equal(r.output[0].content[0].type, 'reasoning_text');
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
  checkUsage(r, 24);
});

test('forced tool calls (required and named) carry schema-valid arguments', async () => {
  const validate = ajv.compile(weatherParams);
  for (const tool_choice of ['required', { type: 'function', name: 'get_weather' }]) {
    const r = await client.responses.create({
      model: 'spark-test', input: 'Weather in Paris?', tools: [weatherTool], tool_choice, seed: 11,
      parallel_tool_calls: false, reasoning: { effort: 'none' }, max_output_tokens: 160 });
    const calls = r.output.filter((i) => i.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    assert.equal(calls[0].name, 'get_weather');
    assert.match(calls[0].call_id, /^call_/);
    assert.match(calls[0].id, /^fc_/);
    const args = JSON.parse(calls[0].arguments);
    assert.ok(validate(args), `${calls[0].arguments}: ${JSON.stringify(validate.errors)}`);
    assert.equal(r.status, 'completed');
    assert.equal(r.parallel_tool_calls, false);
  }
});

test('text.format json_schema replies validate, thinking off and on', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  const validate = ajv.compile(schema);
  for (const effort of ['none', 'low']) {
    const r = await client.responses.create({
      model: 'spark-test', input: 'A person as JSON.', reasoning: { effort }, max_output_tokens: 64,
      text: { format: { type: 'json_schema', name: 'person', schema, strict: true } } });
    assert.equal(r.text.format.type, 'json_schema');
    const value = JSON.parse(r.output_text);
    assert.ok(validate(value), `${r.output_text}: ${JSON.stringify(validate.errors)}`);
  }
  const r = await client.responses.create({
    model: 'spark-test', input: 'Any JSON object.', reasoning: { effort: 'none' }, max_output_tokens: 32,
    text: { format: { type: 'json_object' } } });
  const v = JSON.parse(r.output_text);
  assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v));
});

test('responses.stream: typed events in order, to the final response', async () => {
  const stream = client.responses.stream({
    model: 'spark-test', input: 'Weather?', tools: [weatherTool], tool_choice: 'required', seed: 12,
    reasoning: { effort: 'low' }, max_reasoning_tokens: 16, max_output_tokens: 200 });
  const events = [];
  for await (const e of stream) events.push(e);
  const final = await stream.finalResponse();
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(types.at(-1), 'response.completed');
  events.forEach((e, i) => assert.equal(e.sequence_number, i));
  for (const t of ['response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta',
    'response.reasoning_text.done', 'response.content_part.done', 'response.function_call_arguments.delta',
    'response.function_call_arguments.done', 'response.output_item.done']) {
    assert.ok(types.includes(t), `no ${t} in ${types.join(',')}`);
  }
  // Each item's events sit between its added and done; the streamed deltas add up to the final items.
  const call = final.output.find((i) => i.type === 'function_call');
  const argDeltas = events.filter((e) => e.type === 'response.function_call_arguments.delta' && e.item_id === call.id);
  assert.equal(argDeltas.map((e) => e.delta).join(''), call.arguments);
  assert.ok(ajv.compile(weatherParams)(JSON.parse(call.arguments)));
  const reasoning = final.output.find((i) => i.type === 'reasoning');
  const reasoningDeltas = events.filter((e) => e.type === 'response.reasoning_text.delta');
  assert.equal(reasoningDeltas.map((e) => e.delta).join(''), reasoning.content[0].text);
  for (const [idx, item] of final.output.entries()) {
    const added = types.findIndex((t, i) => t === 'response.output_item.added' && events[i].output_index === idx);
    const done = types.findIndex((t, i) => t === 'response.output_item.done' && events[i].output_index === idx);
    assert.ok(added >= 0 && done > added);
    const { parsed_arguments: _parsed, ...streamed } = item;  // the SDK adds parsed_arguments to the final response
    assert.deepEqual(events[done].item, streamed);
  }
  checkUsage(final, 200);

  // Plain text, streamed: output_text deltas add up to the final text.
  const text = client.responses.stream({ model: 'spark-test', input: 'Hi', reasoning: { effort: 'none' }, max_output_tokens: 10 });
  let streamed = '';
  text.on('response.output_text.delta', (e) => { streamed += e.delta; });
  const done = await text.finalResponse();
  assert.equal(streamed, done.output_text);
  assert.ok(['completed', 'incomplete'].includes(done.status));
});

test('previous_response_id continues from the store and reuses the prefix cache; retrieve, input_items, delete', async () => {
  const instructions = 'You are a weather assistant. Always answer with the tool result and a short summary of it. '.repeat(3);
  const first = await client.responses.create({
    model: 'spark-test', instructions, input: 'Weather in Rome?', tools: [weatherTool],
    tool_choice: 'required', reasoning: { effort: 'none' }, max_output_tokens: 160 });
  const call = first.output.find((i) => i.type === 'function_call');
  assert.ok(call);
  const second = await client.responses.create({
    model: 'spark-test', instructions, previous_response_id: first.id, tools: [weatherTool],
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny, 25C' }],
    reasoning: { effort: 'none' }, max_output_tokens: 16 });
  assert.equal(second.previous_response_id, first.id);
  // The whole first turn is re-rendered in front of the new input: its prompt prefix comes from the cache.
  assert.ok(second.usage.input_tokens > first.usage.input_tokens);
  assert.ok(second.usage.input_tokens_details.cached_tokens >= 16,
    `cached ${second.usage.input_tokens_details.cached_tokens} of ${second.usage.input_tokens}`);

  const got = await client.responses.retrieve(second.id);
  assert.equal(got.id, second.id);
  assert.deepEqual(got.output, second.output);
  const items = await client.responses.inputItems.list(second.id, { order: 'asc' });
  const types = items.data.map((i) => i.type);
  // The first input, the first output (its call), then the new function_call_output.
  assert.deepEqual(types.slice(-2), ['function_call', 'function_call_output']);
  assert.equal(items.data[0].type, 'message');
  assert.equal(items.data.at(-1).call_id, call.call_id);

  await client.responses.delete(second.id);
  await assert.rejects(client.responses.retrieve(second.id), (e) => e.status === 404);
  await assert.rejects(
    client.responses.create({ model: 'spark-test', previous_response_id: second.id, input: 'again', max_output_tokens: 4 }),
    (e) => e.status === 400 && /not found/.test(e.message));
  // store: false leaves nothing to retrieve.
  const unstored = await client.responses.create({ model: 'spark-test', input: 'x', store: false, max_output_tokens: 4 });
  assert.equal(unstored.store, false);
  await assert.rejects(client.responses.retrieve(unstored.id), (e) => e.status === 404);
});

test('errors come in OpenAI shape naming the Responses parameter', async () => {
  await assert.rejects(
    client.responses.create({ model: 'spark-test', input: 'x', text: { format: { type: 'xml' } } }),
    (e) => e.status === 400 && e.param === 'text.format' && e.type === 'invalid_request_error');
  await assert.rejects(
    client.responses.create({ model: 'spark-test', input: 'x', max_output_tokens: 0 }),
    (e) => e.status === 400 && e.param === 'max_output_tokens');
  await assert.rejects(
    client.responses.create({ model: 'spark-test', input: 'x', reasoning: { effort: 'extreme' } }),
    (e) => e.status === 400 && e.param === 'reasoning.effort');
  await assert.rejects(
    client.responses.create({ model: 'other-model', input: 'x' }), (e) => e.status === 404);
});
