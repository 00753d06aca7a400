// /v1/completions (string and token-id prompts, echo, logprobs), /v1/models, /health, /tokenize,
// /detokenize and /metrics.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => { await server.stop(); });

test('/v1/models lists the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['spark-test']);
  assert.equal(models.data[0].object, 'model');
});

test('/health answers 200 when ready', async () => {
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
});

test('a string prompt and the same prompt as token ids give the same completion', async () => {
  const tok = await postJson(`${server.url}/tokenize`, { prompt: 'The quick brown fox' });
  assert.equal(tok.status, 200);
  assert.equal(tok.json.count, tok.json.tokens.length);
  assert.ok(tok.json.max_model_len > 0);
  const a = await client.completions.create({ model: 'spark-test', prompt: 'The quick brown fox', max_tokens: 10, temperature: 0 });
  const b = await client.completions.create({ model: 'spark-test', prompt: tok.json.tokens, max_tokens: 10, temperature: 0 });
  assert.equal(a.object, 'text_completion');
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.equal(a.usage.prompt_tokens, tok.json.tokens.length);
  const det = await postJson(`${server.url}/detokenize`, { tokens: tok.json.tokens });
  assert.equal(det.json.prompt, 'The quick brown fox');
});

test('completions default to 16 tokens, echo the prompt and report legacy logprobs', async () => {
  const r = await client.completions.create({ model: 'spark-test', prompt: 'Hello', echo: true, logprobs: 2, temperature: 0, ignore_eos: true });
  const c = r.choices[0];
  assert.ok(c.text.startsWith('Hello'));
  assert.equal(r.usage.completion_tokens, 16);
  assert.equal(c.logprobs.tokens.length, 16);
  assert.equal(c.logprobs.token_logprobs.length, 16);
  assert.equal(Object.keys(c.logprobs.top_logprobs[0]).length <= 2, true);
});

test('/tokenize renders messages through the chat template', async () => {
  const r = await postJson(`${server.url}/tokenize`, { messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.status, 200);
  const plain = await postJson(`${server.url}/tokenize`, { prompt: 'hi' });
  assert.ok(r.json.count > plain.json.count + 3, 'the template adds the turn markers');
});

test('/metrics exposes Prometheus counters, histograms and KV usage', async () => {
  await client.chat.completions.create({ model: 'spark-test', messages: [{ role: 'user', content: 'x' }], max_tokens: 3 });
  const text = await (await fetch(`${server.url}/metrics`)).text();
  for (const name of ['spark_requests_submitted_total', 'spark_generation_tokens_total', 'spark_num_requests_waiting',
    'spark_kv_cache_usage_ratio', 'spark_time_to_first_token_seconds_bucket', 'spark_time_per_output_token_seconds_count',
    'spark_prefix_cache_hit_rate']) {
    assert.ok(text.includes(name), `missing ${name}`);
  }
  const m = await server.metrics();
  assert.ok(m.spark_requests_finished_total >= 1);
});

test('a second turn that resends the conversation is served from the prefix cache', async () => {
  const first = [{ role: 'user', content: 'Tell me a long story about a lighthouse keeper and the sea.' }];
  const r1 = await client.chat.completions.create({ model: 'spark-test', messages: first, max_tokens: 24, temperature: 0, ignore_eos: true, chat_template_kwargs: { enable_thinking: false } });
  const second = [...first, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'And then?' }];
  const r2 = await client.chat.completions.create({ model: 'spark-test', messages: second, max_tokens: 4, chat_template_kwargs: { enable_thinking: false } });
  // The cache reuses whole 16-token blocks (docs/prefix-cache.md), as vLLM does: every full block of the
  // first turn's prompt, at least.
  const block = 16;
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > 0 && cached >= Math.floor(r1.usage.prompt_tokens / block) * block,
    `cached ${cached} of ${r2.usage.prompt_tokens} (first turn: ${r1.usage.prompt_tokens})`);
});
