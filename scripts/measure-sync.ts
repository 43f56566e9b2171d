/**
 * Sync timings of the iptables backend on the real kernel, in a fresh
 * network namespace per variant and size (the host's tables are not touched).
 *
 *   sudo npm run measure:sync -- --services 1000,5000 --endpoints 10 --variants nft,legacy --repeats 5
 *
 * For each variant and size it measures, with synthetic services:
 * - first full sync: onto empty tables (what a node's first start writes);
 * - restart full sync: a new drover adopting the same rules (read back, diff, nothing to write);
 * - resync after drift: a full sync when one service's chains were deleted behind drover's back;
 * - partial sync, one endpoint removed / added back; one service added / removed.
 * Partial and resync timings are the median of `--repeats` runs. Times are
 * wall-clock milliseconds of the backend's sync() (render + read-back + restore).
 */
import { parseArgs } from 'node:util';
import { IptablesBackend } from '../src/modes/iptables/backend.ts';
import { SystemIptables, type IptablesVariant } from '../src/modes/iptables/exec.ts';
import type { SyncResult } from '../src/modes/types.ts';
import { synthServicePort, synthSnapshot, withServicePort } from '../src/bench/synth.ts';
import { median } from '../src/bench/stats.ts';
import { silentLogger } from '../src/util/log.ts';
import { withNetns } from '../src/testbed/netns.ts';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '1000,5000' },
    endpoints: { type: 'string', default: '10' },
    variants: { type: 'string', default: 'nft,legacy' },
    repeats: { type: 'string', default: '5' },
  },
});
const sizes = values.services.split(',').map(Number);
const endpoints = Number(values.endpoints);
const variants = values.variants.split(',') as IptablesVariant[];
const repeats = Number(values.repeats);
const FULL = { full: true, changed: new Set<string>() };

interface Row {
  variant: string;
  services: number;
  kind: string;
  ms: number;
  transactions: number;
  bytes: number;
}
const rows: Row[] = [];

function record(variant: string, services: number, kind: string, results: SyncResult[]): void {
  const ms = median(results.map((r) => r.totalMs));
  const last = results.at(-1)!;
  rows.push({ variant, services, kind, ms, transactions: last.transactions, bytes: last.bytes });
  process.stderr.write(`${variant} ${services} ${kind}: ${ms.toFixed(0)} ms\n`);
}

for (const variant of variants) {
  for (const n of sizes) {
    await withNetns(async (netns) => {
      const exec = new SystemIptables({ variant, netns, timeoutMs: 900_000 });
      const make = () => new IptablesBackend({ exec, render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, logger: silentLogger() });
      const base = synthSnapshot(n, endpoints);
      let backend = make();
      record(variant, n, 'first full sync (empty tables)', [await backend.sync(base, FULL)]);
      backend = make();
      record(variant, n, 'restart full sync (nothing to write)', [await backend.sync(base, FULL)]);

      const key = 'bench/svc-7:http';
      const fewer = withServicePort(base, key, synthServicePort(7, endpoints - 1));
      const removed: SyncResult[] = [];
      const added: SyncResult[] = [];
      for (let i = 0; i < repeats; i++) {
        removed.push(await backend.sync(fewer, { full: false, changed: new Set([key]) }));
        added.push(await backend.sync(base, { full: false, changed: new Set([key]) }));
      }
      record(variant, n, 'partial sync: one endpoint removed', removed);
      record(variant, n, 'partial sync: one endpoint added', added);

      const newKey = synthServicePort(n, endpoints).key;
      const more = withServicePort(base, newKey, synthServicePort(n, endpoints));
      const svcAdded: SyncResult[] = [];
      const svcRemoved: SyncResult[] = [];
      for (let i = 0; i < repeats; i++) {
        svcAdded.push(await backend.sync(more, { full: false, changed: new Set([newKey]) }));
        svcRemoved.push(await backend.sync(base, { full: false, changed: new Set([newKey]) }));
      }
      record(variant, n, 'partial sync: one service added', svcAdded);
      record(variant, n, 'partial sync: one service removed', svcRemoved);

      const drift: SyncResult[] = [];
      const svcChain = (await exec.save('nat')).match(/^:(KUBE-SVC-\w+)/m)![1]!;
      for (let i = 0; i < repeats; i++) {
        const jump = (await exec.save('nat')).split('\n').find((l) => l.startsWith('-A KUBE-SERVICES') && l.endsWith(svcChain))!;
        await exec.restore(`*nat\n${jump.replace('-A ', '-D ')}\n:${svcChain} - [0:0]\n-X ${svcChain}\nCOMMIT\n`);
        drift.push(await backend.sync(base, FULL));
      }
      record(variant, n, 'full resync repairing one deleted service chain', drift);
    });
  }
}

const kinds = [...new Set(rows.map((r) => r.kind))];
const columns = variants.flatMap((v) => sizes.map((n) => ({ v, n })));
const out = [
  `iptables backend sync times, median ms (${endpoints} endpoints per service, repeats ${repeats}; first/restart: one run)`,
  '',
  `| sync | ${columns.map((c) => `${c.v} ${c.n}`).join(' | ')} |`,
  `|---|${columns.map(() => '---:').join('|')}|`,
  ...kinds.map((k) => {
    const cells = columns.map((c) => {
      const r = rows.find((x) => x.kind === k && x.variant === c.v && x.services === c.n);
      return r ? `${r.ms.toFixed(0)}${r.transactions > 1 ? ` (${r.transactions} txns)` : ''}` : '';
    });
    return `| ${k} | ${cells.join(' | ')} |`;
  }),
];
process.stdout.write(`${out.join('\n')}\n`);
