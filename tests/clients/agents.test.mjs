// The OpenAI Agents SDK (@openai/agents), unchanged, over both of its APIs (setOpenAIAPI "responses" and
// "chat_completions"): an Agent with one function tool and toolChoice "required" calls the tool with
// schema-valid arguments, sends the result back and ends within maxTurns with a final output (held to a
// zod schema); an Agent with a zod outputType alone returns a parsed object. Random weights: the forced call and the json_schema format give the structure.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { z } from 'zod';
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { startServer } from './lib.mjs';

let server;
before(async () => {
  server = await startServer();
  setTracingDisabled(true);
  setDefaultOpenAIClient(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 }));
});
after(async () => { await server.stop(); });

const CitySchema = z.object({ city: z.string(), unit: z.enum(['C', 'F']) });
// The final turn's reply is held to a schema too: text from random weights rarely ends before the token
// limit, and the Responses API reports that as incomplete, which the SDK refuses.
const ReportSchema = z.object({ summary: z.string().max(24), sunny: z.boolean() });
const PersonSchema = z.object({ name: z.string().max(10), age: z.number().int().min(0).max(120), member: z.boolean() });

for (const api of ['responses', 'chat_completions']) {
  test(`${api}: a required tool call runs, its result goes back, the run ends`, async () => {
    setOpenAIAPI(api);
    const calls = [];
    const weather = tool({
      name: 'get_weather',
      description: 'Weather forecast for a city',
      parameters: CitySchema,
      execute: async (args) => {
        calls.push(args);
        return `sunny in ${args.city}`;
      },
    });
    const agent = new Agent({
      name: 'forecaster',
      instructions: 'Use the tool, then answer briefly.',
      model: 'spark-test',
      tools: [weather],
      outputType: ReportSchema,
      // Required on the first turn only: the SDK resets it to auto once the tool ran (resetToolChoice).
      modelSettings: { toolChoice: 'required', maxTokens: 160, reasoning: { effort: 'none' } },
    });
    const result = await run(agent, 'Weather in Lima?', { maxTurns: 4 });
    assert.ok(calls.length >= 1, 'the tool was never called');
    for (const args of calls) assert.ok(CitySchema.safeParse(args).success, JSON.stringify(args));
    // The tool's output went back to the model as a function_call_output / tool message.
    assert.ok(result.newItems.some((i) => i.type === 'tool_call_output_item'));
    assert.ok(ReportSchema.safeParse(result.finalOutput).success, JSON.stringify(result.finalOutput));
    assert.ok(result.rawResponses.length >= 2 && result.rawResponses.length <= 4);
  });

  test(`${api}: a zod outputType comes back parsed`, async () => {
    setOpenAIAPI(api);
    const agent = new Agent({
      name: 'registrar',
      instructions: 'Describe a person.',
      model: 'spark-test',
      outputType: PersonSchema,
      modelSettings: { maxTokens: 64, reasoning: { effort: 'none' } },
    });
    const result = await run(agent, 'Invent a club member.', { maxTurns: 2 });
    const parsed = PersonSchema.safeParse(result.finalOutput);
    assert.ok(parsed.success, JSON.stringify(result.finalOutput));
  });
}
