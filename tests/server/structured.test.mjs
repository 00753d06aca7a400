// Structured outputs: response_format json_object / json_schema, vLLM's structured_outputs and guided_*.
// Even the random-weight test model's replies parse and validate (ajv), streamed or not, with thinking on
// or off, and with a max_tokens too tight for anything but the shortest completion.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { startServer, postJson } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => { await server.stop(); });

const ajv = new Ajv({ strict: false });
const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    tags: { type: 'array', items: { enum: ['red', 'green', null] }, maxItems: 2 },
    address: { $ref: '#/$defs/address' },
  },
  required: ['name', 'age'],
  additionalProperties: false,
  $defs: { address: { type: 'object', properties: { zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['zip'], additionalProperties: false } },
};
const messages = [{ role: 'user', content: 'Describe a person as JSON.' }];
const noThinking = { chat_template_kwargs: { enable_thinking: false } };
const jsonSchemaFormat = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };

function parsesAndValidates(text, s) {
  const value = JSON.parse(text);
  const validate = ajv.compile(s);
  assert.ok(validate(value), `${text}: ${JSON.stringify(validate.errors)}`);
  return value;
}

test('json_schema replies parse and validate, thinking off and on', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: 'spark-test', messages, max_tokens: 80, seed, response_format: jsonSchemaFormat, ...noThinking });
    parsesAndValidates(r.choices[0].message.content, schema);
  }
  // Thinking on: the reasoning is free text, the reply after </think> follows the schema.
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 120, seed: 4, response_format: jsonSchemaFormat });
  parsesAndValidates(r.choices[0].message.content, schema);
});

test('json_schema streamed', async () => {
  const stream = await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 80, seed: 5, stream: true, response_format: jsonSchemaFormat, ...noThinking });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  parsesAndValidates(text, schema);
});

test('json_object replies are JSON objects, streamed and not, n=2', async () => {
  const r = await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 48, n: 2, seed: 6, response_format: { type: 'json_object' }, ...noThinking });
  for (const c of r.choices) {
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  }
  const stream = await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 48, seed: 7, stream: true, response_format: { type: 'json_object' }, ...noThinking });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(typeof JSON.parse(text), 'object');
});

test('a tight max_tokens still ends in a valid reply (budget steering)', async () => {
  const r = await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 24, seed: 8, response_format: jsonSchemaFormat, ...noThinking });
  parsesAndValidates(r.choices[0].message.content, schema);
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('vLLM structured_outputs and guided_* on completions and chat', async () => {
  const choice = await client.completions.create({
    model: 'spark-test', prompt: 'Pick one:', max_tokens: 8, seed: 1, structured_outputs: { choice: ['alpha', 'beta', 'gamma'] } });
  assert.ok(['alpha', 'beta', 'gamma'].includes(choice.choices[0].text), choice.choices[0].text);
  const regex = await client.completions.create({
    model: 'spark-test', prompt: 'A code:', max_tokens: 12, seed: 2, guided_regex: '[A-Z]{2}-[0-9]{3}' });
  assert.match(regex.choices[0].text, /^[A-Z]{2}-[0-9]{3}$/);
  const json = await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 60, seed: 3, guided_json: schema, ...noThinking });
  parsesAndValidates(json.choices[0].message.content, schema);
  const choiceChat = await client.chat.completions.create({
    model: 'spark-test', messages, max_tokens: 8, seed: 4, guided_choice: ['yes', 'no'], ...noThinking });
  assert.ok(['yes', 'no'].includes(choiceChat.choices[0].message.content));
});

test('a keyword the engine cannot enforce is a 400 naming it', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: 'spark-test', messages, max_tokens: 8,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } }),
    (e) => e instanceof OpenAI.BadRequestError && /uniqueItems/.test(e.message) && e.param === 'response_format.json_schema.schema');
  const r = await postJson(`${server.url}/v1/chat/completions`, {
    model: 'spark-test', messages, response_format: { type: 'json_schema', json_schema: { schema: { type: 'string', pattern: '(a)\\1' } } } });
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /backreference/);
  const both = await postJson(`${server.url}/v1/chat/completions`, {
    model: 'spark-test', messages, response_format: { type: 'json_object' }, guided_regex: 'a' });
  assert.equal(both.status, 400, both.text);
  // A keyword of the wrong JSON type inside schemas that get merged was a 500 (fuzzing, bug 18).
  const wrongType = await postJson(`${server.url}/v1/chat/completions`, {
    model: 'spark-test', messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {
      required: 'object', anyOf: [{ required: ['a'] }, { required: ['b'] }] } } } });
  assert.equal(wrongType.status, 400, wrongType.text);
  assert.match(wrongType.json.error.message, /'required' must be an array/);
});

test('a constraint too costly to enforce is a 400 before it reaches the engine, which goes on serving', async () => {
  const costly = [
    { guided_regex: '(.*.*.*.*){50}' },  // every mask past the work limit (grammar::WorkMeter)
    { guided_regex: '(.*)'.repeat(1000) },  // epsilon closures past their bound (600M entries unbounded)
    { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^(.*.*.*.*){50}$' } } } },
  ];
  const send = async (extra) => {
    const r = await postJson(`${server.url}/v1/chat/completions`, { model: 'spark-test', messages, max_tokens: 8, ...noThinking, ...extra });
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.error.message, /too costly to enforce|grammar too large/, r.text);
  };
  for (const extra of costly) await send(extra);
  // Sent again: the closure refusal is kept (no build), the first mask's is not (it depends on the masks
  // the vocabulary has shared so far), so that one builds again.
  const compiles = async () => (await server.metrics()).spark_grammar_compiles_total;
  let before = await compiles();
  await send(costly[1]);
  assert.equal(await compiles(), before);
  before = await compiles();
  await send(costly[0]);
  assert.equal(await compiles(), before + 1);
  // The first mask is cheap (only 'x'), the ones after it are not: the engine ends the request with a client
  // error. A non-streamed reply sends its status only when generation has ended, so that status is 400 (not a
  // 200 with an error body); a stream's status went out with its first event, so the error is its last event.
  for (const path of ['/v1/chat/completions', '/v1/completions']) {
    const prompt = path === '/v1/completions' ? { prompt: 'Hello' } : { messages, ...noThinking };
    const later = await postJson(`${server.url}${path}`, {
      model: 'spark-test', max_tokens: 8, ...prompt, guided_regex: 'x(.*.*.*.*){50}' });
    assert.equal(later.status, 400, `${path}: ${later.text}`);
    assert.equal(later.json.error.type, 'invalid_request_error', later.text);
    assert.match(later.json.error.message, /too costly to enforce/, later.text);
  }
  const streamed = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'spark-test', messages, max_tokens: 8, ...noThinking, stream: true,
                           guided_regex: 'x(.*.*.*.*){50}' }) });
  assert.equal(streamed.status, 200);
  const events = (await streamed.text()).split('\n\n').filter((e) => e.startsWith('data: '));
  const last = JSON.parse(events[events.length - 1].slice(6));
  assert.equal(last.error.type, 'invalid_request_error', JSON.stringify(last));
  assert.match(last.error.message, /too costly to enforce/);
  const reply = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 4, ...noThinking });
  assert.equal(reply.choices.length, 1);
});

test('compiled grammars are kept within --grammar-cache-max-count / -bytes and shown in /metrics', async () => {
  const before = await server.metrics();
  assert.ok(before.spark_grammar_cache_grammars >= 1, 'the schemas above are kept');
  assert.ok(before.spark_grammar_cache_bytes > 0 && before.spark_grammar_cache_bytes <= 256 * 1024 * 1024);
  const small = await startServer(['--grammar-cache-max-count', '2']);
  try {
    const c = small.client();
    for (let i = 0; i < 4; ++i) {
      const s = { type: 'object', properties: { [`field${i}`]: { type: 'integer' } }, required: [`field${i}`], additionalProperties: false };
      const r = await c.chat.completions.create({
        model: 'spark-test', messages, max_tokens: 24, seed: i,
        response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema: s, strict: true } }, ...noThinking });
      parsesAndValidates(r.choices[0].message.content, s);
    }
    const m = await small.metrics();
    assert.equal(m.spark_grammar_cache_grammars, 2);
    assert.ok(m.spark_grammar_cache_bytes > 0);
  } finally {
    await small.stop();
  }
});
