// Tool calling: with tool_choice "required" or a named function, constrained decoding makes even the
// random-weight test model return a valid call whose arguments satisfy the tool's schema.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './lib.mjs';

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
