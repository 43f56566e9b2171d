/**
 * What the periodic check of `drover run` costs in iptables mode, against
 * the full read-back it replaces, at one size, in a throw-away network
 * namespace (root):
 *
 *   tsx scripts/drift-check-cost.ts [SERVICES [ENDPOINTS [ROUNDS]]]   # default 10000 10 5
 *
 * It programs SERVICES synthetic service ports of ENDPOINTS endpoints each
 * with a full sync, then times ROUNDS of each: the drift check (canary
 * chains, plus the nf_tables generation when drover runs in the namespace,
 * as it does here), and a full sync that finds nothing to write (the old
 * periodic resync). Prints the medians of wall time and of this process's
 * and its children's CPU time.
 */
import { readFileSync } from 'node:fs';
import { synthSnapshot } from '../src/bench/synth.ts';
import { inOwnNetns } from './own-netns.ts';
import { IptablesBackend } from '../src/modes/iptables/backend.ts';
import { SystemIptables } from '../src/kernel/iptables/exec.ts';
import { silentLogger } from '../src/util/log.ts';

const [services = 10_000, endpoints = 10, rounds = 5] = process.argv.slice(2).map(Number);

// Run inside a namespace of our own (netlink answers for the process's namespace), removed at the end, also on failure.
inOwnNetns(import.meta.url, 'DROVER_DRIFT_NETNS', 'd');

/** Wall and CPU (user + system, this process and its finished children) of `fn`, ms. */
async function timed(fn: () => Promise<unknown>): Promise<{ wall: number; cpu: number }> {
  const cpu0 = process.cpuUsage();
  const children0 = childCpu();
  const t0 = performance.now();
  await fn();
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { wall, cpu: (cpu.user + cpu.system) / 1000 + (childCpu() - children0) };
}

/** CPU of this process's finished children (iptables-save, iptables), ms: cutime + cstime of /proc/self/stat, in clock ticks of 10 ms. */
function childCpu(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const backend = new IptablesBackend({ exec: new SystemIptables({ variant: 'nft', timeoutMs: 900_000 }), render: { clusterCIDR: '10.0.0.0/8', masqueradeAll: false }, logger: silentLogger() });
const snapshot = synthSnapshot(services, endpoints);
const first = await timed(() => backend.sync(snapshot, { full: true, changed: new Set() }));
console.log(`programmed ${services} services × ${endpoints} endpoints: ${(first.wall / 1000).toFixed(1)} s`);
const check: Array<{ wall: number; cpu: number }> = [];
const full: Array<{ wall: number; cpu: number }> = [];
for (let i = 0; i < rounds; i++) {
  let why: string | undefined;
  check.push(await timed(async () => (why = await backend.driftCheck())));
  if (why !== undefined) throw new Error(`the drift check suspects drift on an untouched namespace: ${why}`);
  full.push(await timed(() => backend.sync(snapshot, { full: true, changed: new Set() })));
}
const show = (name: string, xs: Array<{ wall: number; cpu: number }>) =>
  console.log(`${name.padEnd(28)} median wall ${median(xs.map((x) => x.wall)).toFixed(1)} ms, CPU (drover and its iptables commands) ${median(xs.map((x) => x.cpu)).toFixed(1)} ms`);
show('drift check', check);
show('full sync, nothing to write', full);
console.log(`ratio (full / check, wall): ${(median(full.map((x) => x.wall)) / median(check.map((x) => x.wall))).toFixed(0)}×`);
