/**
 * Sync times of IPVS mode and iptables mode side by side, on the same
 * kernel, each in a fresh network namespace (nothing outside them is
 * touched). Needs root and a kernel with IPVS: run it in the drover test
 * guest, where it is TCG-emulated (about 25x slower than the host; compare
 * the ratios, not the absolute times):
 *
 *   scripts/vm/run.sh --timeout 5400 -- node --import tsx scripts/measure-ipvs.ts --services 1000 --endpoints 10
 *
 * For each mode it measures, with synthetic services (src/bench/synth.ts):
 * - first full sync (empty kernel state);
 * - restart full sync (a new backend adopting the same state: read back,
 *   diff, nothing to write);
 * - partial syncs: one endpoint removed / added back, one service added /
 *   removed (median of --repeats);
 * - full resync repairing drift (IPVS: one real server deleted by hand;
 *   iptables: one service chain deleted by hand; median of --repeats).
 *
 * IPVS netlink sockets act in the namespace of their process, so each mode
 * runs in a worker process started inside its namespace
 * (`ip netns exec NS node --import tsx scripts/measure-ipvs.ts --worker MODE`);
 * the worker prints one JSON row per measurement and the parent prints the
 * table with the IPVS/iptables ratio of each row.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { IptablesBackend } from '../src/modes/iptables/backend.ts';
import { SystemIptables } from '../src/modes/iptables/exec.ts';
import { IpvsBackend } from '../src/modes/ipvs/backend.ts';
import { SystemIpset } from '../src/modes/ipvs/ipset.ts';
import { RtnlLinkManager } from '../src/modes/ipvs/link.ts';
import { IpvsClient } from '../src/modes/ipvs/netlink.ts';
import { ProcSysctls } from '../src/modes/ipvs/sysctl.ts';
import type { Backend, SyncResult } from '../src/modes/types.ts';
import { median } from '../src/bench/stats.ts';
import { synthServicePort, synthSnapshot, withServicePort } from '../src/bench/synth.ts';
import { run } from '../src/testbed/exec.ts';
import { withNetns } from '../src/testbed/netns.ts';
import { silentLogger } from '../src/util/log.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '1000' },
    endpoints: { type: 'string', default: '10' },
    repeats: { type: 'string', default: '3' },
    modes: { type: 'string', default: 'ipvs,iptables' },
    worker: { type: 'string' },
  },
});
const services = Number(values.services);
const endpoints = Number(values.endpoints);
const repeats = Number(values.repeats);
const FULL = { full: true, changed: new Set<string>() };
const RENDER = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };

/** One measurement. */
interface Row {
  readonly mode: string;
  readonly kind: string;
  /** Median total sync time, ms. */
  readonly ms: number;
  /** Median read-back time, ms. */
  readonly readMs: number;
}

if (values.worker) await worker(values.worker);
else await parent();

async function worker(mode: string): Promise<void> {
  const emit = (kind: string, results: SyncResult[]): void => {
    const row: Row = { mode, kind, ms: median(results.map((r) => r.totalMs)), readMs: median(results.map((r) => r.readMs)) };
    process.stdout.write(`${JSON.stringify(row)}\n`);
    process.stderr.write(`${mode} ${kind}: ${row.ms.toFixed(0)} ms\n`);
  };
  const iptables = new SystemIptables({ variant: 'nft', timeoutMs: 3_600_000 });
  const clients: IpvsClient[] = [];
  const links = new RtnlLinkManager();
  const make = async (): Promise<Backend & { close?: () => void }> => {
    if (mode === 'iptables') return new IptablesBackend({ exec: iptables, render: RENDER, logger: silentLogger() });
    const ipvs = await IpvsClient.open({ timeoutMs: 120_000 });
    clients.push(ipvs);
    return new IpvsBackend({
      ipvs,
      ipset: new SystemIpset(3_600_000),
      iptables,
      links,
      sysctls: new ProcSysctls(),
      render: RENDER,
      scheduler: 'rr',
      serviceCIDR: '10.96.0.0/12',
      gracefulPeriodMs: 900_000,
      gracefulCheckIntervalMs: 0,
      logger: silentLogger(),
    });
  };

  const base = synthSnapshot(services, endpoints);
  let backend = await make();
  emit('first full sync (empty kernel state)', [await backend.sync(base, FULL)]);
  backend = await make();
  emit('restart full sync (nothing to write)', [await backend.sync(base, FULL)]);

  const key = 'bench/svc-7:http';
  const fewer = withServicePort(base, key, synthServicePort(7, endpoints - 1));
  const removed: SyncResult[] = [];
  const added: SyncResult[] = [];
  for (let i = 0; i < repeats; i++) {
    removed.push(await backend.sync(fewer, { full: false, changed: new Set([key]) }));
    added.push(await backend.sync(base, { full: false, changed: new Set([key]) }));
  }
  emit('partial sync: one endpoint removed', removed);
  emit('partial sync: one endpoint added', added);

  const newKey = synthServicePort(services, endpoints).key;
  const more = withServicePort(base, newKey, synthServicePort(services, endpoints));
  const svcAdded: SyncResult[] = [];
  const svcRemoved: SyncResult[] = [];
  for (let i = 0; i < repeats; i++) {
    svcAdded.push(await backend.sync(more, { full: false, changed: new Set([newKey]) }));
    svcRemoved.push(await backend.sync(base, { full: false, changed: new Set([newKey]) }));
  }
  emit('partial sync: one service added', svcAdded);
  emit('partial sync: one service removed', svcRemoved);

  const drift: SyncResult[] = [];
  const sp = base.services.get(key)!;
  for (let i = 0; i < repeats; i++) {
    if (mode === 'iptables') {
      const nat = await iptables.save('nat');
      const svcChain = nat.match(/^:(KUBE-SVC-\w+)/m)![1]!;
      const jump = nat.split('\n').find((l) => l.startsWith('-A KUBE-SERVICES') && l.endsWith(svcChain))!;
      await iptables.restore(`*nat\n${jump.replace('-A ', '-D ')}\n:${svcChain} - [0:0]\n-X ${svcChain}\nCOMMIT\n`);
    } else {
      const target = sp.endpoints[0]!;
      await run('ipvsadm', ['-d', '-t', `${sp.clusterIP}:${sp.port}`, '-r', `${target.ip}:${target.port}`]);
    }
    drift.push(await backend.sync(base, FULL));
  }
  emit(mode === 'iptables' ? 'full resync repairing drift (one service chain deleted)' : 'full resync repairing drift (one real server deleted)', drift);
  backend.close?.();
  for (const c of clients) c.close();
  links.close();
}

async function parent(): Promise<void> {
  const modes = values.modes.split(',');
  const rows: Row[] = [];
  for (const mode of modes) {
    await withNetns(async (netns) => {
      await run('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
      const argv = ['netns', 'exec', netns, process.execPath, '--import', 'tsx', fileURLToPath(import.meta.url), '--worker', mode,
        '--services', String(services), '--endpoints', String(endpoints), '--repeats', String(repeats)];
      const child = spawn('ip', argv, { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      if (code !== 0) throw new Error(`${mode} worker exited with ${code}`);
      for (const line of out.split('\n').filter(Boolean)) rows.push(JSON.parse(line) as Row);
    });
  }
  const kinds = [...new Set(rows.map((r) => r.kind.replace(/ \(one .*\)$/, '')))];
  const cell = (mode: string, kind: string): Row | undefined => rows.find((r) => r.mode === mode && r.kind.startsWith(kind));
  const lines = [
    `Sync times, median ms, ${services} services x ${endpoints} endpoints (partial and drift rows: median of ${repeats}); IPVS/iptables ratio`,
    '',
    '| sync | ipvs | iptables (nft) | ipvs / iptables |',
    '|---|---:|---:|---:|',
    ...kinds.map((k) => {
      const a = cell('ipvs', k);
      const b = cell('iptables', k);
      const ratio = a && b ? (a.ms / b.ms).toFixed(2) : '';
      return `| ${k} | ${a ? a.ms.toFixed(0) : ''} | ${b ? b.ms.toFixed(0) : ''} | ${ratio} |`;
    }),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
