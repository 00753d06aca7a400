// LangChain JS (@langchain/openai ChatOpenAI), unchanged: invoke, stream, bindTools with a forced tool call,
// and withStructuredOutput(zod) — on chat completions, and invoke plus a forced call on the Responses API
// (useResponsesApi). Random weights: structure only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { startServer } from './lib.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server.stop(); });

function chat(options = {}) {
  return new ChatOpenAI({
    model: 'spark-test', apiKey: 'unused', configuration: { baseURL: `${server.url}/v1` }, maxRetries: 0,
    // ChatOpenAI sends `reasoning` only for model names it knows to reason; thinking off through the
    // chat field for everything else.
    maxTokens: 16, reasoning: { effort: 'none' }, modelKwargs: { reasoning_effort: 'none' }, ...options });
}

const CityInput = z.object({ city: z.string(), unit: z.enum(['C', 'F']) });
const weather = tool(async ({ city }) => `sunny in ${city}`, {
  name: 'get_weather', description: 'Weather forecast for a city', schema: CityInput });

test('invoke and stream', async () => {
  const reply = await chat().invoke('Say hi.');
  assert.equal(typeof reply.content, 'string');
  assert.ok(reply.usage_metadata.output_tokens > 0 && reply.usage_metadata.output_tokens <= 16);
  let text = '', chunks = 0;
  for await (const chunk of await chat().stream('Say hi.')) {
    text += typeof chunk.content === 'string' ? chunk.content : '';
    ++chunks;
  }
  assert.ok(chunks > 0);
  assert.equal(typeof text, 'string');
});

for (const useResponsesApi of [false, true]) {
  test(`bindTools with a forced call (${useResponsesApi ? 'responses' : 'chat completions'})`, async () => {
    const thinkingOff = useResponsesApi ? { reasoning: { effort: 'none' } } : { reasoning_effort: 'none' };
    const model = chat({ maxTokens: 160, useResponsesApi, modelKwargs: thinkingOff }).bindTools([weather], { tool_choice: 'get_weather' });
    const reply = await model.invoke('Weather in Bogota?');
    assert.equal(reply.tool_calls.length, 1, JSON.stringify(reply));
    assert.equal(reply.tool_calls[0].name, 'get_weather');
    assert.ok(CityInput.safeParse(reply.tool_calls[0].args).success, JSON.stringify(reply.tool_calls[0].args));
    assert.ok(reply.tool_calls[0].id);
  });
}

test('withStructuredOutput(zod)', async () => {
  // Bounds (maxLength, minimum) are enforced by the json_schema grammar, not yet by the tool-call constraint
  // functionCalling goes through: this schema needs only what both enforce.
  const Person = z.object({ name: z.string(), member: z.boolean(), level: z.enum(['a', 'b']) });
  for (const method of ['jsonSchema', 'functionCalling']) {
    const value = await chat({ maxTokens: 160 }).withStructuredOutput(Person, { name: 'person', method }).invoke('Invent a person.');
    assert.ok(Person.safeParse(value).success, `${method}: ${JSON.stringify(value)}`);
  }
});
