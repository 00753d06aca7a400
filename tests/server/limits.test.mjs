// Bounded requests: JSON nested 100000 deep is a 400 (it used to overflow the stack), and each cap (n, stop,
// tools, logit_bias, top_logprobs, response_format, headers) is a 400/431 in OpenAI's error shape, with the
// flag that sets it honoured; a full queue or compile queue is a 429 with Retry-After. The server answers a
// good request afterwards.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer(['--max-n', '3', '--max-stop-strings', '4', '--max-tools', '2',
                              '--max-tool-schema-bytes', '2000', '--max-logit-bias', '5',
                              '--max-body-bytes', String(4 << 20), '--max-grammar-compiles', '1',
                              '--max-header-count', '40', '--max-header-bytes', '16384']);
  client = server.client();
});
after(async () => { await server.stop(); });

const ok = { model: 'spark-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
const tool = (name, pad = 0) => ({ type: 'function', function: { name, description: 'd'.repeat(pad), parameters: { type: 'object', properties: {} } } });

function assertOpenAIError(r, status, what) {
  assert.equal(r.status, status, `${what}: ${r.text}`);
  const e = r.json?.error;
  assert.equal(typeof e?.message, 'string', `${what}: ${r.text}`);
  assert.ok('type' in e && 'param' in e && 'code' in e, what);
  if (status === 400) assert.equal(e.type, 'invalid_request_error', what);
  return e;
}

test('JSON nested 100000 deep is a 400 on every JSON route, and the server lives on', async () => {
  const deep = '['.repeat(100000) + ']'.repeat(100000);
  for (const [path, body] of [
    ['/v1/chat/completions', `{"model": "spark-test", "messages": ${deep}}`],
    ['/v1/chat/completions', `{"model": "spark-test", "messages": [{"role": "user", "content": "hi"}], "tools": ${deep}}`],
    ['/v1/completions', `{"model": "spark-test", "prompt": ${deep}}`],
    ['/tokenize', `{"messages": ${deep}}`],
    ['/detokenize', `{"tokens": ${deep}}`],
  ]) {
    const e = assertOpenAIError(await postJson(`${server.url}${path}`, body), 400, path);
    assert.match(e.message, /nested deeper than 128 levels/);
  }
  // Unclosed, too: the bound applies before the parser sees the end.
  assertOpenAIError(await postJson(`${server.url}/v1/chat/completions`, '{"messages": ' + '{"a":'.repeat(50000)), 400, 'unclosed');
  // Deep tool-call arguments inside a message are refused the same way.
  const args = '{"x": ' + '['.repeat(300) + ']'.repeat(300) + '}';
  const withArgs = { ...ok, messages: [{ role: 'user', content: 'a' }, { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }] }] };
  assertOpenAIError(await postJson(`${server.url}/v1/chat/completions`, withArgs), 400, 'deep arguments');
  const good = await client.chat.completions.create(ok);
  assert.equal(good.choices.length, 1);
});

test('a schema given as JSON text nested 100000 deep is a 400; objects of 200000 keys are parsed and rendered', async () => {
  // vLLM's guided_json / structured_outputs.json take a schema as text: it was parsed unbounded and then
  // dumped recursively, so this one request was a SIGSEGV.
  const deep = '{"a":'.repeat(100000) + '{}' + '}'.repeat(100000);
  for (const [path, extra] of [
    ['/v1/completions', { prompt: 'hi', guided_json: deep }],
    ['/v1/chat/completions', { messages: ok.messages, structured_outputs: { json: deep } }],
  ]) {
    const r = await postJson(`${server.url}${path}`, { model: 'spark-test', max_tokens: 2, ...extra });
    const e = assertOpenAIError(r, 400, path);
    assert.match(e.message, /deeper than 128 levels/);
  }
  // nlohmann's ordered parser scanned an object's members for each new key: this 2.5 MB body took about
  // 45 s of a core. The bounded parse appends members (tests/unit/util/bounded_json_test.cpp).
  const wide = {};
  for (let i = 0; i < 200000; i++) wide[`k${i}`] = i;
  const r = await postJson(`${server.url}/v1/chat/completions`, { ...ok, chat_template_kwargs: wide });
  assert.equal(r.status, 200, r.text);
  // The same keys as a tool call's arguments become a template dict (46 s of a core in DictData::set): the
  // answer is the context-length 400, at once.
  const call = { id: 'c1', type: 'function', function: { name: 'f', arguments: JSON.stringify(wide) } };
  const withCall = { ...ok, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, tool_calls: [call] },
                                       { role: 'tool', tool_call_id: 'c1', content: 'ok' }] };
  const e = assertOpenAIError(await postJson(`${server.url}/v1/chat/completions`, withCall), 400, 'wide arguments');
  assert.match(e.message, /maximum context length/);
  const good = await client.chat.completions.create(ok);
  assert.equal(good.choices.length, 1);
});

test('a regex or schema pattern of 400000 nested groups or stacked quantifiers is a 400, a chain of 20000 $refs compiles, and the server lives on', async () => {
  // The regex parser recursed once a group and every pass over the expression once a quantifier: each of
  // these 0.6-0.8 MB constraints was a SIGSEGV of the server.
  const groups = '('.repeat(400000) + 'a' + ')'.repeat(400000);
  const stars = 'a' + '*'.repeat(300000);
  for (const [path, extra, what] of [
    ['/v1/completions', { prompt: 'hi', structured_outputs: { regex: groups } }, /groups nested deeper than 128 levels/],
    ['/v1/completions', { prompt: 'hi', guided_regex: stars }, /nothing to repeat/],
    ['/v1/chat/completions', { messages: ok.messages, response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', pattern: groups } } } }, /groups nested deeper than 128 levels/],
  ]) {
    const r = await postJson(`${server.url}${path}`, { model: 'spark-test', max_tokens: 2, ...extra });
    const e = assertOpenAIError(r, 400, path);
    assert.match(e.message, what);
    assert.ok(e.message.length < 1000, `the error quotes the whole pattern: ${e.message.length} bytes`);
  }
  // A chain of 20 000 $refs (0.7 MB): the schema compiler recursed once a link (a SIGSEGV); now it compiles.
  const defs = {};
  for (let i = 0; i < 20000; i++) defs[`a${i}`] = { $ref: `#/$defs/a${i + 1}` };
  defs.a20000 = { type: 'integer' };
  const chained = { ...ok, response_format: { type: 'json_schema', json_schema: { name: 'c', schema: { $ref: '#/$defs/a0', $defs: defs } } } };
  const r = await postJson(`${server.url}/v1/chat/completions`, chained);
  assert.equal(r.status, 200, r.text.slice(0, 300));
  const good = await client.chat.completions.create(ok);
  assert.equal(good.choices.length, 1);
});

test('a prompt that can never run is refused before its grammars compile', async () => {
  // The tool-call grammar of this schema is refused as too large; with a prompt past the context the answer
  // is the context-length 400, before any compiling (a 6 MB request of strict tools used to compile for 17 s
  // first).
  const big = { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'string', pattern: '(a{1000}){1000}' } }, required: ['a'] } } };
  const forced = { ...ok, tools: [big], tool_choice: 'required' };
  let e = assertOpenAIError(await postJson(`${server.url}/v1/chat/completions`, forced), 400, 'grammar');
  assert.match(e.message, /cannot constrain decoding to these tools/);
  const long = { ...forced, messages: [{ role: 'user', content: 'word '.repeat(100000) }] };
  e = assertOpenAIError(await postJson(`${server.url}/v1/chat/completions`, long), 400, 'long');
  assert.match(e.message, /maximum context length/);
  const longSchema = { model: 'spark-test', prompt: 'word '.repeat(100000), max_tokens: 2, structured_outputs: { regex: '(a{1000}){1000}' } };
  e = assertOpenAIError(await postJson(`${server.url}/v1/completions`, longSchema), 400, 'long completion');
  assert.match(e.message, /maximum context length/);
});

test('a spec refused as too costly is built once: requests with it wait or read the kept refusal, each named by its own field', async () => {
  const regex = 'c(.*a*.*.*){200}';
  const bodies = [{ structured_outputs: { regex } }, { guided_regex: regex }, { structured_outputs: { regex } }]
    .map((so) => ({ model: 'spark-test', prompt: 'hi', max_tokens: 2, ...so }));
  const before = (await server.metrics()).spark_grammar_compiles_total;
  const answers = await Promise.all(bodies.map((b) => postJson(`${server.url}/v1/completions`, b)));
  const params = ['structured_outputs.regex', 'guided_regex', 'structured_outputs.regex'];
  answers.forEach((r, i) => {
    const e = assertOpenAIError(r, 400, params[i]);
    assert.equal(e.param, params[i]);
    assert.ok(e.message.startsWith(`'${params[i]}' cannot be enforced: grammar too large`), e.message);
  });
  const after = await server.metrics();
  assert.equal(after.spark_grammar_compiles_total, before + 1);
  assert.ok(after.spark_grammar_refusals_cached >= 1);
  assert.equal(after.spark_grammar_compiles_waiting_for_equal, 0);
});

test('grammar compiles past --max-grammar-compiles and its queue are a 429 with Retry-After', async () => {
  // One compile at a time and 4 waiting: of 8 distinct grammars sent at once (each compiles for most of a
  // second before its epsilon closures pass their bound), at least 3 find no place. The server answers after.
  const slow = (i) => ({ model: 'spark-test', prompt: 'hi', max_tokens: 2,
                         structured_outputs: { regex: `${'b'.repeat(i + 1)}(.*a*.*.*){200}` } });
  const answers = await Promise.all([...Array(8).keys()].map((i) => postJson(`${server.url}/v1/completions`, slow(i))));
  const refused = answers.filter((r) => r.status === 429);
  assert.ok(refused.length >= 3, answers.map((r) => r.status).join(' '));
  for (const r of refused) {
    const e = assertOpenAIError(r, 429, 'compile queue');
    assert.equal(e.type, 'rate_limit_error');
    assert.match(e.message, /too many grammar compiles are waiting/);
    assert.equal(r.headers.get('retry-after'), '1');
  }
  for (const r of answers.filter((a) => a.status !== 429)) {
    assert.match(assertOpenAIError(r, 400, 'compiled').message, /regex/);
  }
  const good = await client.chat.completions.create(ok);
  assert.equal(good.choices.length, 1);
});

test('each cap is a 400 naming its parameter; the value at the cap is accepted', async () => {
  const cases = [
    ['n', { n: 3 }, { n: 4 }],
    ['stop', { stop: ['a', 'b', 'c', 'd'] }, { stop: ['a', 'b', 'c', 'd', 'e'] }],
    ['stop', { stop: 'x'.repeat(1024) }, { stop: 'x'.repeat(1025) }],
    ['tools', { tools: [tool('a'), tool('b')] }, { tools: [tool('a'), tool('b'), tool('c')] }],
    ['tools[0].function', { tools: [tool('a', 1500)] }, { tools: [tool('a', 2500)] }],
    ['logit_bias', { logit_bias: { 1: 1, 2: 1, 3: 1, 4: 1, 5: 1 } }, { logit_bias: { 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1 } }],
    ['logit_bias', { logit_bias: { 1023: 5 } }, { logit_bias: { 1024: 5 } }],  // vocab_size is 1024
    ['stop_token_ids', { stop_token_ids: [1023] }, { stop_token_ids: [1024] }],
    ['top_logprobs', { logprobs: true, top_logprobs: 20 }, { logprobs: true, top_logprobs: 21 }],
    ['response_format', { response_format: { type: 'json_object' } }, { response_format: { type: 'yaml' } }],
    ['response_format', { response_format: { type: 'text' } }, { response_format: 'json' }],
  ];
  for (const [param, good, bad] of cases) {
    const g = await postJson(`${server.url}/v1/chat/completions`, { ...ok, ...good });
    assert.equal(g.status, 200, `${param} at the cap: ${g.text}`);
    const e = assertOpenAIError(await postJson(`${server.url}/v1/chat/completions`, { ...ok, ...bad }), 400, param);
    assert.equal(e.param, param, JSON.stringify(e));
  }
  // Completions share the sampling caps.
  const c = await postJson(`${server.url}/v1/completions`, { model: 'spark-test', prompt: 'x', max_tokens: 1, logit_bias: { 5000: 1 } });
  assertOpenAIError(c, 400, 'completions logit_bias');
});

test('too many or too large request headers are refused with 431, at the flags\' bounds', async () => {
  const post = (headers) => fetch(`${server.url}/v1/chat/completions`,
    { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(ok) });
  const many = (n, value = 'v') => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-h${i}`, value]));
  // 50 headers and 3 x 6 KB are within the defaults (100, 64 KiB) but past --max-header-count 40 and
  // --max-header-bytes 16384.
  for (const headers of [many(50), many(3, 'b'.repeat(6000))]) {
    const r = await post(headers);
    const text = await r.text();
    assert.equal(r.status, 431, text);
    assert.match(JSON.parse(text).error.message, /headers.*--max-header-count/);
  }
  for (const headers of [many(20), many(2, 'b'.repeat(6000))]) {  // fetch adds about ten of its own
    const r = await post(headers);
    assert.equal(r.status, 200, await r.text());
  }
});

test('a request past --max-queued-requests is a 429 with Retry-After; the running and queued ones go on', async () => {
  // One running place and one queue place: A runs (its first token seen), B waits in the queue (the
  // gauge says so), so C has no place whatever the timing.
  const small = await startServer(['--max-num-seqs', '1', '--max-queued-requests', '1', '--shutdown-timeout', '1']);
  const abort = new AbortController();
  let b = null;
  try {
    const body = (max_tokens, stream = false) => ({ model: 'spark-test', prompt: 'hi', max_tokens, ignore_eos: true, stream });
    const a = await fetch(`${small.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body(20000, true)),
      signal: abort.signal,
    });
    assert.equal(a.status, 200);
    const reader = a.body.getReader();
    await reader.read();  // A is running
    b = postJson(`${small.url}/v1/completions`, body(2));
    let waiting = 0;
    for (let i = 0; i < 2400 && waiting !== 1; ++i) {  // up to a minute on a loaded machine
      waiting = (await small.metrics()).spark_num_requests_waiting;
      if (waiting !== 1) await new Promise((r) => setTimeout(r, 25));
    }
    assert.equal(waiting, 1, 'B never showed in the queue');
    const c = await postJson(`${small.url}/v1/completions`, body(2));
    const e = assertOpenAIError(c, 429, 'queue full');
    assert.equal(e.type, 'rate_limit_error');
    assert.ok(Number(c.headers.get('retry-after')) >= 1, `Retry-After: ${c.headers.get('retry-after')}`);
    abort.abort();  // A's client goes away: its place frees and B runs
    const rb = await b;
    assert.equal(rb.status, 200, rb.text);
    assert.equal(rb.json.usage.completion_tokens, 2);
  } finally {
    abort.abort();
    if (b) await b.catch(() => {});
    await small.stop();
  }
});
