// Three spark-server replicas of the tiny checkpoint behind Debian's nginx, configured from
// deploy/nginx/spark-server.conf (only the replica list and listen port rewritten), all on loopback, all
// started and stopped here. Shows the deployment's contract:
// - affinity: every session's turns land on one replica (X-Served-By) and, from turn 2 on, almost all of
//   each prompt comes from that replica's prefix cache;
// - failover: SIGKILL one replica mid-run: streams it was serving fail, every later request of every
//   session succeeds on the others, no request goes unanswered;
// - drain: SIGTERM one replica while it streams: its streams complete, new requests go elsewhere, it exits 0.
//
//   node tests/deploy/nginx_replicas.mjs --bin build/bin --work DIR [--nginx /usr/sbin/nginx]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { runSessions, streamTurn } from '../../tools/loadtest.mjs';
import { exited, freePort, startNginx, startReplica, writeNginxConf } from '../../tools/nginx_cluster.mjs';
const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const BIN = path.resolve(args.bin ?? 'build/bin');
const WORK = path.resolve(args.work ?? 'build/deploy-work');
const NGINX = args.nginx ?? '/usr/sbin/nginx';
const REPLICAS = 3;
const BLOCK = 16;  // positions per KV block, the prefix cache's granularity (EngineOptions::block_size)

let failures = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) ++failures;
}

// Whether a new TCP connection to the server at `url` is refused (its listener is closed).
function refused(url) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const sock = net.connect({ host: hostname, port: Number(port) });
    sock.once('connect', () => { sock.destroy(); resolve(false); });
    sock.once('error', (e) => resolve(e.code === 'ECONNREFUSED'));
  });
}

function sessionsByReplica(records) {
  const where = new Map();
  for (const r of records) {
    if (!where.has(r.session)) where.set(r.session, new Set());
    if (r.servedBy) where.get(r.session).add(r.servedBy);
  }
  return where;
}

async function main() {
  if (!existsSync(NGINX)) throw new Error(`no nginx at ${NGINX} (tools/install-deps.sh installs nginx-light)`);
  const model = path.join(WORK, 'tiny-3');
  if (!existsSync(path.join(model, 'model.safetensors'))) {
    mkdirSync(WORK, { recursive: true });
    execFileSync(path.join(BIN, 'spark-make-checkpoint'), ['--preset', 'tiny', '--seed', '3', '-o', model]);
  }
  const prefix = path.join(WORK, 'nginx');
  rmSync(prefix, { recursive: true, force: true });
  mkdirSync(prefix, { recursive: true });

  const replicas = [];
  let nginx = null;
  try {
    for (let i = 0; i < REPLICAS; ++i) replicas.push(await startReplica({
      bin: BIN, model, name: `replica-${i}`,
      extra: ['--threads', '1', '--kv-cache-memory-bytes', String(96 << 20), '--shutdown-timeout', '60'],
    }));
    const port = await freePort();
    writeNginxConf(prefix, port, replicas);
    nginx = await startNginx(NGINX, prefix, port);
    const byName = Object.fromEntries(replicas.map((r) => [r.name, r]));

    // Affinity.
    const t0 = performance.now();
    // The issue's load: 24 agent sessions x 6 turns.
    const SESSIONS = 24, TURNS = 6;
    const a = await runSessions({ url: nginx.url, sessions: SESSIONS, turns: TURNS, concurrency: 8, maxTokens: 12 });
    console.log('affinity run:', JSON.stringify(a.summary));
    check(a.summary.errors === 0, `affinity: all ${a.records.length} requests succeeded (${a.summary.errors} errors)`);
    const where = sessionsByReplica(a.records);
    check([...where.values()].every((s) => s.size === 1), 'affinity: every session stayed on one replica');
    check(Object.keys(a.summary.by_replica).length >= 2, `affinity: sessions spread over replicas ${JSON.stringify(a.summary.by_replica)}`);
    // From turn 2 on, every complete 16-token block of the previous turn's prompt comes from the cache
    // (docs/prefix-cache.md); the reply's blocks too, unless the next turn came before they were inserted.
    const laterTurns = a.records.filter((r) => r.turn > 0).map((r) => [
      a.records.find((p) => p.session === r.session && p.turn === r.turn - 1), r]);
    const short = laterTurns.filter(([prev, r]) => !(r.cachedTokens >= Math.floor(prev.promptTokens / BLOCK) * BLOCK));
    check(laterTurns.length === SESSIONS * (TURNS - 1) && short.length === 0,
          `affinity: all ${laterTurns.length} turns from turn 2 on reused the previous prompt's blocks ` +
          `(cached share ${a.summary.cached_share_from_turn2}; short: ` +
          `${short.map(([prev, r]) => `${r.cachedTokens}/${prev.promptTokens}`).join(', ') || 'none'})`);
    console.log(`affinity phase: ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    // Failover: once a fifth of the turns are done, SIGKILL the replica serving the most sessions.
    const victim = byName[Object.entries(a.summary.by_replica).sort((x, y) => y[1] - x[1])[0][0]];
    let killedAt = null;
    let done = 0;
    const f = await runSessions({
      url: nginx.url, sessions: 12, turns: 5, concurrency: 6, maxTokens: 12,
      onTurn: async () => {
        if (++done === 10 && killedAt === null) {
          killedAt = Infinity;
          victim.proc.kill('SIGKILL');
          // "After the kill" means after the process is gone: requests sent in between are in flight at it.
          await exited(victim.proc);
          killedAt = performance.now();
        }
      },
    });
    console.log(`failover run (killed ${victim.name}):`, JSON.stringify(f.summary));
    check(f.records.length === 12 * 5, `failover: every request got an answer or an error (${f.records.length}/60)`);
    const after = f.records.filter((r) => killedAt !== null && r.startedAt > killedAt);
    check(after.length > 0 && after.every((r) => r.ok),
          `failover: all ${after.length} requests started after the kill succeeded`);
    check(after.every((r) => r.servedBy !== victim.name), 'failover: none of them went to the killed replica');
    const failed = f.records.filter((r) => !r.ok);
    check(failed.every((r) => r.startedAt <= killedAt),
          `failover: the ${failed.length} failed request(s) were all in flight at the kill`);
    // The killed replica's sessions move and warm up again: the first turn on the new replica computes its
    // prompt, the second reuses every complete 16-token block of it from that replica's cache
    // (docs/prefix-cache.md: floor(n / 16) * 16 of the n tokens). A share of the prompt is no test: the
    // new user message and reply are a larger share of an early turn's prompt than of a later one's.
    const victimSessions = [...where.entries()].filter(([, s]) => s.has(victim.name)).map(([id]) => id);
    const moved = victimSessions.map((id) => f.records.filter((r) => r.session === id && r.startedAt > killedAt)
      .sort((x, y) => x.turn - y.turn).slice(0, 2)).filter((t) => t.length === 2);
    const reused = ([first, second]) => second.ok && second.servedBy === first.servedBy &&
      second.cachedTokens >= Math.floor(first.promptTokens / BLOCK) * BLOCK;
    check(moved.length > 0 && moved.every(reused),
          `failover: ${moved.length} moved session(s) reused the blocks of their first prompt elsewhere on their ` +
          `second turn there (cached/first prompt: ` +
          `${moved.map(([a, b]) => `${b.cachedTokens}/${a.promptTokens}`).join(', ')})`);

    // Drain: SIGTERM a surviving replica while it streams; its streams finish, new requests go elsewhere.
    const survivors = replicas.filter((r) => r !== victim);
    const target = survivors[0];
    const pinned = [...sessionsByReplica(f.records.filter((r) => r.startedAt > killedAt)).entries()]
      .filter(([, s]) => s.has(target.name)).map(([id]) => id);
    check(pinned.length > 0, `drain: ${pinned.length} session(s) are on ${target.name}`);
    const longBody = { model: 'spark-test', max_tokens: 400, ignore_eos: true, temperature: 0,
                       messages: [{ role: 'user', content: 'Write a long answer.' }] };
    const streams = pinned.slice(0, 3).map((id) => streamTurn(nginx.url, longBody, { 'X-Session-Id': id }));
    // Wait until the target is producing tokens for them, then SIGTERM it.
    // (Deadlines only bound a broken run: the waits end on the condition.)
    for (const deadline = performance.now() + 60000; performance.now() < deadline;) {
      const m = await (await fetch(`${target.url}/metrics`)).text();
      const running = Number(m.match(/^spark_num_requests_running (\S+)/m)?.[1] ?? 0);
      if (running >= Math.min(3, pinned.length)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    target.proc.kill('SIGTERM');
    const termAt = performance.now();
    // The drain closes the listener first: once a connection is refused, nginx can only move on.
    for (const deadline = performance.now() + 60000; performance.now() < deadline && !(await refused(target.url));)
      await new Promise((r) => setTimeout(r, 20));
    const during = await Promise.all(pinned.slice(0, 3).map((id) => streamTurn(nginx.url,
      { ...longBody, max_tokens: 4 }, { 'X-Session-Id': id })));
    const finished = await Promise.all(streams);
    check(finished.every((r) => r.ok && r.completionTokens === 400 && r.servedBy === target.name),
          `drain: ${finished.length} in-flight stream(s) on ${target.name} completed (${finished.map((r) => r.error ?? r.completionTokens).join(', ')})`);
    check(finished.every((r) => r.startedAt < termAt && r.startedAt + r.ms > termAt), 'drain: they were in flight at SIGTERM');
    check(during.every((r) => r.ok && r.servedBy !== target.name),
          `drain: new requests of its sessions succeeded elsewhere (${during.map((r) => r.servedBy ?? r.error).join(', ')})`);
    const code = await exited(target.proc);
    check(code === 0, `drain: ${target.name} exited with status ${code}`);
  } finally {
    if (nginx) {
      nginx.proc.kill('SIGQUIT');
      await exited(nginx.proc);
    }
    for (const r of replicas) {
      if (r.proc.exitCode === null && r.proc.signalCode === null) {
        r.proc.kill('SIGTERM');
        await exited(r.proc);
      }
    }
  }
  if (failures > 0) {
    console.log(`${failures} check(s) failed; nginx error log:\n${readFileSync(path.join(prefix, 'error.log'), 'utf8').slice(-4000)}`);
    process.exit(1);
  }
  console.log('all deployment checks passed');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
