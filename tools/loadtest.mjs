#!/usr/bin/env node
// A bounded agent-session load generator: S sessions x T turns against one spark-server or an nginx in front
// of replicas. Each turn sends the session's whole conversation so far (as an agent does), so the prefix
// cache, and the affinity that keeps a session on one replica, decide how much of each prompt is recomputed.
// Reports per-turn TTFT, tokens/s, errors, the replica that served each turn (X-Served-By) and the share of
// prompt tokens the server took from its prefix cache (usage.prompt_tokens_details.cached_tokens).
//
//   node tools/loadtest.mjs --url http://127.0.0.1:8000 --sessions 24 --turns 6 [--concurrency 8]
//        [--max-tokens 16] [--tools] [--system-words 160] [--model NAME] [--api-key KEY] [--no-session-header] [--json FILE]
//
// Plain fetch, no npm packages. Also imported by tests/deploy/nginx_replicas.mjs (runSessions).
import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const TOOLS = [{
  type: 'function',
  function: {
    name: 'read_file',
    description: 'Read a file of the workspace',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  },
}];

// A distinct, deterministic opening per session: a system prompt of `words` words (an agent's instructions
// and workspace notes; real ones run to thousands of tokens) and a task. Sessions must not share prefixes,
// or the cached share would measure cross-session sharing rather than affinity: the session number leads.
const WORDS = ['module', 'parser', 'cache', 'replica', 'token', 'stream', 'header', 'buffer', 'socket', 'schema',
               'session', 'request', 'kernel', 'thread', 'queue', 'engine', 'prompt', 'layer', 'page', 'ring'];
function opening(session, words) {
  let x = (session + 1) * 2654435761 % 4294967296;
  const text = [];
  for (let i = 0; i < words; ++i) {
    x = (x * 1103515245 + 12345) % 2147483648;
    text.push(WORDS[x % WORDS.length]);
  }
  return [
    { role: 'system', content: `Session ${session}. You are a coding agent. Workspace notes: ${text.join(' ')}.` },
    { role: 'user', content: `Plan the refactor of module ${session} step by step, one short step per reply.` },
  ];
}

// One streamed chat completion. Resolves to a record; never rejects (errors are part of the result).
export async function streamTurn(url, body, headers = {}, { timeoutMs = 120000 } = {}) {
  const t0 = performance.now();
  const rec = { startedAt: t0, ok: false, status: 0, servedBy: null, ttftMs: null, ms: 0, text: '', completionTokens: 0,
                promptTokens: 0, cachedTokens: 0, error: null };
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  try {
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      signal: ctrl.signal,
    });
    rec.status = r.status;
    rec.servedBy = r.headers.get('x-served-by');
    if (r.status !== 200) {
      rec.error = `HTTP ${r.status}: ${(await r.text()).slice(0, 200)}`;
      return rec;
    }
    const decoder = new TextDecoder();
    let buf = '';
    let done = false;
    for await (const chunk of r.body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') { done = true; continue; }
        const ev = JSON.parse(data);
        if (ev.error) { rec.error = `stream error: ${ev.error.message}`; continue; }
        const delta = ev.choices?.[0]?.delta;
        if (delta && (delta.content || delta.reasoning_content || delta.tool_calls)) {
          if (rec.ttftMs === null) rec.ttftMs = performance.now() - t0;
          rec.text += delta.content ?? '';
        }
        if (ev.usage) {
          rec.promptTokens = ev.usage.prompt_tokens;
          rec.completionTokens = ev.usage.completion_tokens;
          rec.cachedTokens = ev.usage.prompt_tokens_details?.cached_tokens ?? 0;
        }
      }
    }
    if (!done && !rec.error) rec.error = 'stream ended without [DONE]';
    rec.ok = done && !rec.error;
  } catch (e) {
    rec.error = `${e.name}: ${e.cause?.code ?? e.message}`;
  } finally {
    clearTimeout(timer);
    rec.ms = performance.now() - t0;
  }
  return rec;
}

// Runs `sessions` sessions of `turns` turns, at most `concurrency` sessions at once (each session's turns
// are sequential, as an agent's are). `onTurn(record)` is awaited after every turn (tests use it to kill a
// replica mid-run). Returns every turn's record plus a summary.
export async function runSessions({ url, sessions = 24, turns = 6, concurrency = 8, maxTokens = 16, tools = false,
                                    apiKey = null, sessionHeader = true, onTurn = null, timeoutMs = 120000,
                                    model = null, systemWords = 160 }) {
  if (!model) {
    // The served model's name, asked once (through nginx: from whichever replica answers).
    const r = await fetch(`${url}/v1/models`, { headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {} });
    if (r.status !== 200) throw new Error(`GET /v1/models: HTTP ${r.status}`);
    model = (await r.json()).data?.[0]?.id;
    if (!model) throw new Error('GET /v1/models lists no model');
  }
  const records = [];
  let next = 0;
  const t0 = performance.now();
  async function worker() {
    while (next < sessions) {
      const s = next++;
      const id = `sess-${s}`;
      const messages = opening(s, systemWords);
      for (let t = 0; t < turns; ++t) {
        const headers = {};
        if (sessionHeader) headers['X-Session-Id'] = id;
        if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
        const body = { model, messages, max_tokens: maxTokens, temperature: 0, seed: s,
                       chat_template_kwargs: { enable_thinking: false } };
        if (tools) body.tools = TOOLS;
        const rec = { session: id, turn: t, ...(await streamTurn(url, body, headers, { timeoutMs })) };
        records.push(rec);
        if (onTurn) await onTurn(rec);
        // The conversation grows whatever happened: the reply (or a placeholder after an error), then the
        // next user message.
        messages.push({ role: 'assistant', content: rec.ok ? rec.text : '(no reply)' });
        messages.push({ role: 'user', content: `Turn ${t + 1} of session ${s}: continue with the next step.` });
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, sessions) }, worker));
  return { records, summary: summarize(records, (performance.now() - t0) / 1000) };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(p / 100 * sorted.length))];
}

export function summarize(records, seconds) {
  const ok = records.filter((r) => r.ok);
  const ttft = ok.map((r) => r.ttftMs).filter((v) => v !== null).sort((a, b) => a - b);
  const later = ok.filter((r) => r.turn > 0);
  const laterPrompt = later.reduce((a, r) => a + r.promptTokens, 0);
  const laterCached = later.reduce((a, r) => a + r.cachedTokens, 0);
  const sessions = new Set(records.map((r) => r.session)).size;
  const tokens = ok.reduce((a, r) => a + r.completionTokens, 0);
  const byReplica = {};
  for (const r of ok) byReplica[r.servedBy] = (byReplica[r.servedBy] ?? 0) + 1;
  return {
    seconds: Number(seconds.toFixed(2)),
    sessions,
    requests: records.length,
    errors: records.length - ok.length,
    sessions_per_s: Number((sessions / seconds).toFixed(3)),
    turns_per_s: Number((records.length / seconds).toFixed(3)),
    output_tokens_per_s: Number((tokens / seconds).toFixed(1)),
    ttft_ms_p50: ttft.length ? Number(percentile(ttft, 50).toFixed(1)) : null,
    ttft_ms_p99: ttft.length ? Number(percentile(ttft, 99).toFixed(1)) : null,
    cached_share_from_turn2: laterPrompt > 0 ? Number((laterCached / laterPrompt).toFixed(4)) : null,
    by_replica: byReplica,
  };
}

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; ++i) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument '${argv[i]}'`);
    const key = argv[i].slice(2);
    if (key === 'tools' || key === 'no-session-header') out[key] = true;
    else if (i + 1 < argv.length) out[key] = argv[++i];
    else throw new Error(`--${key} needs a value`);
  }
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  let a;
  try {
    a = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`loadtest: ${e.message}`);
    process.exit(2);
  }
  const num = (k, d, max) => {
    const v = a[k] === undefined ? d : Number(a[k]);
    if (!Number.isInteger(v) || v < 1 || v > max) {
      console.error(`loadtest: --${k} must be an integer in 1..${max}`);
      process.exit(2);
    }
    return v;
  };
  const opts = {
    url: (a.url ?? 'http://127.0.0.1:8000').replace(/\/$/, ''),
    sessions: num('sessions', 24, 100000), turns: num('turns', 6, 1000), concurrency: num('concurrency', 8, 4096),
    maxTokens: num('max-tokens', 16, 100000), tools: !!a.tools, apiKey: a['api-key'] ?? process.env.SPARK_API_KEY ?? null,
    sessionHeader: !a['no-session-header'], model: a.model ?? null, systemWords: num('system-words', 160, 100000),
  };
  const { records, summary } = await runSessions(opts);
  const turns = [];
  for (let t = 0; t < opts.turns; ++t) {
    const rs = records.filter((r) => r.turn === t && r.ok);
    const tt = rs.map((r) => r.ttftMs).sort((x, y) => x - y);
    const prompt = rs.reduce((s, r) => s + r.promptTokens, 0);
    const cached = rs.reduce((s, r) => s + r.cachedTokens, 0);
    const tokS = rs.map((r) => r.completionTokens / ((r.ms - (r.ttftMs ?? 0)) / 1000 || 1));
    turns.push({ turn: t + 1, ok: rs.length, errors: records.filter((r) => r.turn === t).length - rs.length,
                 ttft_ms_p50: tt.length ? Number(percentile(tt, 50).toFixed(1)) : null,
                 decode_tokens_per_s_mean: rs.length ? Number((tokS.reduce((s, v) => s + v, 0) / rs.length).toFixed(1)) : null,
                 prompt_tokens: prompt, cached_share: prompt ? Number((cached / prompt).toFixed(4)) : null });
  }
  console.table(turns);
  console.log(JSON.stringify(summary, null, 2));
  const errors = records.filter((r) => !r.ok).slice(0, 5);
  for (const e of errors) console.error(`error: ${e.session} turn ${e.turn + 1}: ${e.error}`);
  if (a.json) writeFileSync(a.json, JSON.stringify({ options: { ...opts, apiKey: undefined }, summary, turns, records }, null, 2));
  process.exit(summary.errors > 0 ? 1 : 0);
}
