// The Vercel AI SDK (`ai` with @ai-sdk/openai-compatible, on chat completions), unchanged: generateText
// with a tool (forced, executed, schema-valid input), streamText to its final text and usage, and
// generateObject with a zod schema returning a valid object. Random weights: structure only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { generateText, streamText, generateObject, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { startServer } from './lib.mjs';

let server, model;
before(async () => {
  server = await startServer();
  const provider = createOpenAICompatible({
    name: 'spark', baseURL: `${server.url}/v1`, apiKey: 'unused', includeUsage: true, supportsStructuredOutputs: true });
  model = provider('spark-test');
});
after(async () => { await server.stop(); });

const noThinking = { spark: { reasoningEffort: 'none' } };

test('generateText with a forced tool call', async () => {
  const inputs = [];
  const CityInput = z.object({ city: z.string(), unit: z.enum(['C', 'F']) });
  const result = await generateText({
    model,
    prompt: 'Weather in Quito?',
    tools: {
      get_weather: tool({
        description: 'Weather forecast for a city',
        inputSchema: CityInput,
        execute: async (input) => {
          inputs.push(input);
          return { forecast: 'sunny' };
        },
      }),
    },
    toolChoice: 'required',
    maxOutputTokens: 160,
    providerOptions: noThinking,
    maxRetries: 0,
  });
  assert.equal(result.toolCalls.length, 1);
  assert.equal(result.toolCalls[0].toolName, 'get_weather');
  assert.ok(CityInput.safeParse(result.toolCalls[0].input).success, JSON.stringify(result.toolCalls[0].input));
  assert.equal(inputs.length, 1);
  assert.deepEqual(result.toolResults[0].output, { forecast: 'sunny' });
  assert.equal(result.finishReason, 'tool-calls');
});

test('streamText to its final text and usage', async () => {
  const result = streamText({ model, prompt: 'Say hi.', maxOutputTokens: 12, providerOptions: noThinking, maxRetries: 0 });
  let streamed = '';
  for await (const piece of result.textStream) streamed += piece;
  assert.equal(streamed, await result.text);
  const usage = await result.usage;
  assert.ok(usage.outputTokens > 0 && usage.outputTokens <= 12, JSON.stringify(usage));
  assert.ok(usage.inputTokens > 0);
  assert.ok(['stop', 'length'].includes(await result.finishReason));
});

test('generateObject with a zod schema', async () => {
  const Person = z.object({ name: z.string().max(10), age: z.number().int().min(0).max(120), tags: z.array(z.enum(['a', 'b'])).max(2) });
  const { object } = await generateObject({
    model, schema: Person, schemaName: 'person', prompt: 'Invent a person.', maxOutputTokens: 64,
    providerOptions: noThinking, maxRetries: 0 });
  assert.ok(Person.safeParse(object).success, JSON.stringify(object));
});
