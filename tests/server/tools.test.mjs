// Tool calling: with tool_choice "required" or a named function, and for strict tools under "auto", the
// grammar engine makes even the random-weight test model return valid calls whose arguments satisfy the
// tool's whole JSON Schema (checked with ajv), down to a max_tokens of 24.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import { startServer, postJson } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => { await server.stop(); });

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string' },
          days: { type: 'integer' },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city', 'days'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'set_alarm',
      description: 'Set an alarm',
      parameters: { type: 'object', properties: { hour: { type: 'integer' }, loud: { type: 'boolean' } }, required: ['hour'] },
    },
  },
];
const messages = [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }];

function checkCall(call, allowed) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  assert.ok(allowed.includes(call.function.name), call.function.name);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') {
    assert.equal(typeof args.city, 'string');
    assert.ok(Number.isInteger(args.days));
    if ('unit' in args) assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    for (const k of Object.keys(args)) assert.ok(['city', 'days', 'unit'].includes(k), k);
  } else {
    assert.ok(Number.isInteger(args.hour));
    if ('loud' in args) assert.equal(typeof args.loud, 'boolean');
  }
}

for (const thinking of [false, true]) {
  test(`tool_choice required returns a valid call (thinking ${thinking})`, async () => {
    const r = await client.chat.completions.create({
      model: 'spark-test', messages, tools, tool_choice: 'required', max_tokens: 400, seed: 3,
      chat_template_kwargs: { enable_thinking: thinking },
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.ok(c.message.tool_calls.length >= 1);
    for (const call of c.message.tool_calls) checkCall(call, ['get_weather', 'set_alarm']);
  });
}

test('a named tool_choice returns a call of that function', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: 'spark-test', messages, tools, tool_choice: { type: 'function', function: { name: 'set_alarm' } },
      max_tokens: 300, seed, chat_template_kwargs: { enable_thinking: false },
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls.length, 1);
    checkCall(c.message.tool_calls[0], ['set_alarm']);
  }
});

test('streamed tool calls carry index and id on the first delta and rebuild the same call', async () => {
  const req = {
    model: 'spark-test', messages, tools, tool_choice: 'required', max_tokens: 300, seed: 11,
    chat_template_kwargs: { enable_thinking: false },
  };
  const whole = await client.chat.completions.create(req);
  const calls = [];
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
      assert.equal(typeof d.index, 'number');
      if (!calls[d.index]) {
        assert.match(d.id, /^call_/);
        assert.equal(d.type, 'function');
        calls[d.index] = { name: d.function.name, arguments: '' };
      }
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
  }
  assert.equal(calls.length, whole.choices[0].message.tool_calls.length);
  calls.forEach((c, i) => {
    assert.equal(c.name, whole.choices[0].message.tool_calls[i].function.name);
    assert.deepEqual(JSON.parse(c.arguments), JSON.parse(whole.choices[0].message.tool_calls[i].function.arguments));
  });
});

test('tool_choice none returns no calls', async () => {
  const r = await client.chat.completions.create({ model: 'spark-test', messages, tools, tool_choice: 'none', max_tokens: 20 });
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.notEqual(r.choices[0].finish_reason, 'tool_calls');
});

test('past tool calls and tool results render into the next prompt', async () => {
  const history = [
    ...messages,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":3}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
  ];
  const r = await client.chat.completions.create({ model: 'spark-test', messages: history, tools, max_tokens: 5 });
  assert.ok(r.usage.prompt_tokens > 30);
});

// A strict tool whose schema needs more than types: bounds, lengths, a pattern, and a string longer than the
// old automaton's 64-byte cap when minLength asks for it.
const ajv = new Ajv({ strict: false });
const strictParams = {
  type: 'object',
  properties: {
    label: { type: 'string', minLength: 65, maxLength: 70 },
    level: { type: 'integer', minimum: 3, maximum: 7 },
    code: { type: 'string', pattern: '^[A-F]{2}[0-9]$' },
    ratio: { type: 'number', exclusiveMinimum: 0, maximum: 1.5 },
  },
  required: ['label', 'level', 'code'],
  additionalProperties: false,
};
const strictTools = [
  { type: 'function', function: { name: 'tune', description: 'Tune', parameters: strictParams, strict: true } },
  tools[1],
];
const validateStrict = ajv.compile(strictParams);
const validateAlarm = ajv.compile(tools[1].function.parameters);

function checkStrictCall(call) {
  const args = JSON.parse(call.function.arguments);
  const validate = call.function.name === 'tune' ? validateStrict : validateAlarm;
  assert.ok(['tune', 'set_alarm'].includes(call.function.name), call.function.name);
  assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
}

test('a forced call with max_tokens 24 (and less) still parses, thinking off and on', async () => {
  // The demo tokenizer spells the shortest call, set_alarm's, in 16 tokens (tags as single tokens).
  for (const [max_tokens, thinking] of [[24, false], [24, true], [16, false]]) {
    for (const seed of [1, 2]) {
      const r = await client.chat.completions.create({
        model: 'spark-test', messages, tools, tool_choice: 'required', max_tokens, seed,
        parallel_tool_calls: false, chat_template_kwargs: { enable_thinking: thinking },
      });
      const c = r.choices[0];
      const what = `max_tokens ${max_tokens} thinking ${thinking}: ${JSON.stringify(c)}`;
      // At 24 the shortest call and the end token fit; below, the call may fill the budget exactly (finish
      // "length"), but it is still whole.
      if (max_tokens === 24) assert.equal(c.finish_reason, 'tool_calls', what);
      assert.equal(c.message.tool_calls?.length, 1, what);
      assert.equal(c.spark_parse_recovery, undefined, what);
      checkCall(c.message.tool_calls[0], ['get_weather', 'set_alarm']);
      assert.ok(r.usage.completion_tokens <= max_tokens);
    }
  }
  // Too few tokens for even the shortest call: "length".
  const short = await client.chat.completions.create({
    model: 'spark-test', messages, tools, tool_choice: 'required', max_tokens: 8, seed: 1,
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(short.choices[0].finish_reason, 'length');
  // Streamed, named.
  let args = '', finish;
  for await (const chunk of await client.chat.completions.create({
    model: 'spark-test', messages, tools, tool_choice: { type: 'function', function: { name: 'set_alarm' } },
    max_tokens: 24, seed: 5, stream: true, chat_template_kwargs: { enable_thinking: false },
  })) {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) args += d.function?.arguments ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  checkCall({ type: 'function', id: 'call_x', function: { name: 'set_alarm', arguments: args } }, ['set_alarm']);
});

test('strict tools are held to maximum, maxLength, pattern... in every reply', async () => {
  let sawTune = false;
  for (const seed of [1, 2, 3, 4]) {
    for (const stream of [false, true]) {
      const req = {
        model: 'spark-test', messages, tools: strictTools, tool_choice: 'required', max_tokens: 400, seed,
        chat_template_kwargs: { enable_thinking: seed % 2 === 0 },
      };
      let calls = [];
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
          for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
            if (!calls[d.index]) calls[d.index] = { function: { name: d.function.name, arguments: '' } };
            calls[d.index].function.arguments += d.function?.arguments ?? '';
          }
        }
      } else {
        const r = await client.chat.completions.create(req);
        assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
        calls = r.choices[0].message.tool_calls;
      }
      assert.ok(calls.length >= 1);
      calls.forEach(checkStrictCall);
      sawTune ||= calls.some((c) => c.function.name === 'tune');
    }
  }
  assert.ok(sawTune, 'no reply called the strict tool');
});

test('auto with strict tools: text is free, and every call the model opens is valid', async () => {
  const { json: body } = await postJson(`${server.url}/tokenize`, { prompt: '<tool_call>', add_special_tokens: false });
  assert.equal(body.tokens.length, 1);
  const open = body.tokens[0];
  let sawCall = false;
  for (const seed of [1, 2, 3]) {
    // A bias makes the random model open a call; the grammar must then carry it through.
    for (const bias of [{}, { [open]: 30 }]) {
      const r = await client.chat.completions.create({
        model: 'spark-test', messages, tools: strictTools, tool_choice: 'auto', max_tokens: 300, seed,
        logit_bias: bias, parallel_tool_calls: false, chat_template_kwargs: { enable_thinking: false },
      });
      const c = r.choices[0];
      // The strict tool's calls are held to its schema; the other tool's only to the call syntax.
      for (const call of c.message.tool_calls ?? []) {
        if (call.function.name === 'tune') checkStrictCall(call);
        else assert.equal(typeof JSON.parse(call.function.arguments), 'object');
      }
      assert.equal(c.spark_parse_recovery, undefined, JSON.stringify(c));
      if (c.message.tool_calls?.length) {
        sawCall = true;
        assert.equal(c.message.tool_calls.length, 1);
        assert.equal(c.finish_reason, 'tool_calls');
      }
      assert.ok(!(c.message.content ?? '').includes('<tool_call>'), c.message.content);
    }
  }
  assert.ok(sawCall, 'the biased requests should have opened a call');
});

test('a strict tool schema the engine cannot enforce is a 400 naming the keyword', async () => {
  const bad = [{ type: 'function', function: { name: 'u', strict: true, parameters: { type: 'object', properties: { v: { type: 'array', uniqueItems: true } } } } }];
  await assert.rejects(
    client.chat.completions.create({ model: 'spark-test', messages, tools: bad, tool_choice: 'auto', max_tokens: 5 }),
    (e) => e.status === 400 && /uniqueItems/.test(e.message) && e.param === 'tools');
});

test('the Responses endpoint: forced strict calls within 24 tokens, streamed and not', async () => {
  const rtools = strictTools.map((t) => ({ type: 'function', ...t.function }));
  for (const seed of [1, 2]) {
    const req = {
      model: 'spark-test', input: 'Tune it.', tools: rtools, tool_choice: 'required', max_output_tokens: 24,
      parallel_tool_calls: false, reasoning: { effort: seed === 1 ? 'none' : 'low' }, temperature: 1,
    };
    const r = await client.responses.create(req);
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    assert.equal(r.status, 'completed', JSON.stringify(r));
    checkStrictCall({ function: { name: calls[0].name, arguments: calls[0].arguments } });

    const stream = client.responses.stream(req);
    let done;
    for await (const ev of stream) {
      if (ev.type === 'response.function_call_arguments.done') done = ev;
    }
    const final = await stream.finalResponse();
    const fc = final.output.find((o) => o.type === 'function_call');
    assert.ok(done && fc, JSON.stringify(final.output));
    assert.equal(done.arguments, fc.arguments);
    checkStrictCall({ function: { name: fc.name, arguments: fc.arguments } });
  }
});
