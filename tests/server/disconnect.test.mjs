// A client that goes away frees its slot and cache: the metrics show the request cancelled, the
// disconnect counted, and KV usage back to the cached prefixes only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from './lib.mjs';

let server, client;
before(async () => {
  server = await startServer(['--no-enable-prefix-caching']);
  client = server.client();
});
after(async () => { await server.stop(); });

// Far more tokens than are generated before the client goes away, however slowly it gets to: a request that
// was not cancelled is still running (or has generated them all) when the checks look.
const LONG = 30000;

// Polls /metrics until `pred` holds; the minute only turns a hang into a failure.
async function waitFor(pred, what) {
  for (const deadline = Date.now() + 60000; Date.now() < deadline;) {
    const m = await server.metrics();
    if (pred(m)) return m;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}: ${JSON.stringify(await server.metrics())}`);
}

test('closing a stream mid-generation cancels the request and frees its KV cache', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create({
    model: 'spark-test', messages: [{ role: 'user', content: 'Write forever.' }], max_tokens: LONG,
    ignore_eos: true, stream: true,
  }, { signal: controller.signal });
  let n = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta) ++n;
      if (n >= 5) controller.abort();
    }
  } catch (e) {
    assert.ok(controller.signal.aborted, String(e));
  }
  const m = await waitFor((x) => x.spark_requests_cancelled_total >= 1 && x.spark_num_requests_running === 0, 'cancellation');
  assert.ok(m.spark_client_disconnects_total >= 1);
  assert.equal(m.spark_kv_cache_pages_used, 0);
  assert.ok(m.spark_generation_tokens_total < LONG, 'generation stopped early');
});

test('a non-streaming client that disconnects during a long generation is cancelled too', async () => {
  const before = (await server.metrics()).spark_requests_cancelled_total;
  const controller = new AbortController();
  const p = client.chat.completions.create({
    model: 'spark-test', messages: [{ role: 'user', content: 'Again.' }], max_tokens: LONG, ignore_eos: true,
  }, { signal: controller.signal });
  await waitFor((x) => x.spark_num_requests_running === 1, 'the request to run');
  controller.abort();
  await assert.rejects(p);
  const m = await waitFor((x) => x.spark_requests_cancelled_total > before && x.spark_num_requests_running === 0, 'cancellation');
  assert.equal(m.spark_kv_cache_pages_used, 0);
  const ok = await client.chat.completions.create({ model: 'spark-test', messages: [{ role: 'user', content: 'still there?' }], max_tokens: 3 });
  assert.equal(ok.choices.length, 1);
});
