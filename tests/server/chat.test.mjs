// Plain chat completions through the official OpenAI client: shape, usage, max_tokens, n, seeds,
// logprobs, stop sequences, reasoning split and return_token_ids.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => { await server.stop(); });

const messages = [{ role: 'user', content: 'Say something about the sea.' }];

test('a plain chat completion has the OpenAI shape and usage', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, 'spark-test');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.ok(['length', 'stop'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  // Thinking is on by default: the text goes to reasoning_content until </think>.
  assert.equal(typeof (c.message.reasoning_content ?? c.message.content), 'string');
});

test('max_tokens is honoured exactly with ignore_eos', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 7, temperature: 0, ignore_eos: true });
  assert.equal(r.usage.completion_tokens, 7);
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('max_completion_tokens works like max_tokens', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_completion_tokens: 5, ignore_eos: true });
  assert.equal(r.usage.completion_tokens, 5);
});

test('the same seed gives the same output; another seed usually does not', async () => {
  const req = { model: 'spark-test', messages, max_tokens: 24, temperature: 1.0, seed: 1234, ignore_eos: true };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.deepEqual(a.choices[0].message, b.choices[0].message);
  const outs = new Set();
  for (const seed of [1, 2, 3, 4]) {
    const r = await client.chat.completions.create({ ...req, seed, return_token_ids: true });
    outs.add(JSON.stringify(r.choices[0].token_ids));
  }
  assert.ok(outs.size >= 2, 'different seeds should sample differently');
});

test('n=2 returns two indexed choices that differ under sampling', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 16, n: 2, seed: 9, ignore_eos: true, return_token_ids: true });
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.notDeepEqual(r.choices[0].token_ids, r.choices[1].token_ids);
  assert.equal(r.usage.completion_tokens, 32);
});

test('logprobs and top_logprobs are returned per token', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 6);
  for (const t of lp) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
  }
});

test('a stop string ends the answer before it, even when split across tokens', async () => {
  const base = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 40, temperature: 0, ignore_eos: true, chat_template_kwargs: { enable_thinking: false } });
  const text = base.choices[0].message.content;
  assert.ok(text.length > 12, `need some text to cut: ${JSON.stringify(text)}`);
  const stop = text.slice(6, 10);
  const cut = text.indexOf(stop);
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 40, temperature: 0, ignore_eos: true, stop: [stop], chat_template_kwargs: { enable_thinking: false } });
  assert.equal(r.choices[0].message.content, text.slice(0, cut));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('thinking off puts everything in content; return_token_ids gives prompt and output ids', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 10, temperature: 0, ignore_eos: true, return_token_ids: true, chat_template_kwargs: { enable_thinking: false } });
  const c = r.choices[0];
  assert.equal(c.message.reasoning_content, null);
  assert.equal(c.token_ids.length, 10);
  assert.equal(r.prompt_token_ids.length, r.usage.prompt_tokens);
});

test('an unterminated think block is returned as reasoning with finish_reason length', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 9, temperature: 0, logit_bias: { '4': -100 }, ignore_eos: true });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'length');
  assert.ok(c.message.reasoning_content.length > 0, 'the reasoning must not be lost');
});

test('a reasoning budget forces </think> and the answer follows', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, max_tokens: 20, temperature: 0, logit_bias: { '4': -100 }, ignore_eos: true, max_reasoning_tokens: 5, return_token_ids: true });
  const c = r.choices[0];
  assert.equal(c.token_ids[5], 4, 'token 6 is the forced </think>');
  assert.ok(c.message.reasoning_content.length > 0);
  assert.equal(typeof c.message.content, 'string');
});
