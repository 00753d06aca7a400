#!/usr/bin/env node
// The figures of bench/SCALE.md: the same agent-session load (tools/loadtest.mjs) through nginx
// (deploy/nginx/spark-server.conf) in front of 1, 2, ... N replicas, with session affinity and, for
// comparison, round-robin. Loopback only; every process is started and stopped here.
//
//   node tools/scale-bench.mjs --bin build/bin --model DIR [--replicas 1,2,3] [--threads 1] [--pin]
//        [--sessions 12] [--turns 4] [--concurrency 6] [--max-tokens 16] [--round-robin] [--json FILE]
//
// --pin gives replica i the core (i mod cores) with taskset; without it the kernel schedules them.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runSessions } from './loadtest.mjs';
import { exited, freePort, startNginx, startReplica, writeNginxConf } from './nginx_cluster.mjs';

const args = {};
for (let i = 2; i < process.argv.length; ++i) {
  const k = process.argv[i].replace(/^--/, '');
  if (['pin', 'round-robin'].includes(k)) args[k] = true;
  else args[k] = process.argv[++i];
}
if (!args.model) {
  console.error('scale-bench: --model DIR is required (e.g. spark-make-checkpoint --preset demo -o DIR)');
  process.exit(2);
}
const BIN = path.resolve(args.bin ?? 'build/bin');
const NGINX = args.nginx ?? '/usr/sbin/nginx';
const counts = (args.replicas ?? '1,2,3').split(',').map(Number);
const threads = Number(args.threads ?? 1);
const load = { sessions: Number(args.sessions ?? 12), turns: Number(args.turns ?? 4),
               concurrency: Number(args.concurrency ?? 6), maxTokens: Number(args['max-tokens'] ?? 16) };
const work = path.resolve(args.work ?? path.join(os.tmpdir(), `spark-scale-bench-${process.pid}`));

async function measure(n, balance) {
  const prefix = path.join(work, `nginx-${n}-${balance}`);
  rmSync(prefix, { recursive: true, force: true });
  mkdirSync(prefix, { recursive: true });
  const replicas = [];
  let nginx = null;
  try {
    for (let i = 0; i < n; ++i) {
      replicas.push(await startReplica({
        bin: BIN, model: path.resolve(args.model), name: `replica-${i}`,
        extra: ['--threads', String(threads), '--kv-cache-memory-bytes', String(256 << 20)],
        cpus: args.pin ? String(i % os.availableParallelism()) : null,
      }));
    }
    const port = await freePort();
    writeNginxConf(prefix, port, replicas, { balance });
    nginx = await startNginx(NGINX, prefix, port);
    const { summary } = await runSessions({ url: nginx.url, ...load });
    return { replicas: n, balance, ...summary };
  } finally {
    if (nginx) { nginx.proc.kill('SIGQUIT'); await exited(nginx.proc); }
    for (const r of replicas) { r.proc.kill('SIGTERM'); await exited(r.proc); }
  }
}

const rows = [];
for (const n of counts) {
  rows.push(await measure(n, 'hash'));
  if (args['round-robin'] && n > 1) rows.push(await measure(n, 'round-robin'));
  console.log(JSON.stringify(rows.at(-1)));
}
console.table(rows.map(({ by_replica: _, ...r }) => r));
if (args.json) writeFileSync(args.json, JSON.stringify({ cores: os.availableParallelism(), threads, load, rows }, null, 2));
rmSync(work, { recursive: true, force: true });
