/**
 * The peer bench's pieces against the real API server and the real
 * kube-proxy (scripts/peers/bench/), small: 20 Services, one change of
 * each kind and 2 s of churn for kube-proxy and drover in nftables mode.
 * Each proxy must sync, show every change to its client, and report its
 * memory and CPU; the machine's own ruleset must be the same after.
 * The full bench (scripts/peers/bench.ts) is not run here.
 */
import test from 'ava';
import { run } from '../../src/kernel/exec.ts';
import { NFT } from '../../src/modes/nftables/exec.ts';
import { runPeerBench, CHANGE_KINDS } from '../../scripts/peers/bench/run.ts';
import { clusterTestsGate, TIMEOUT_MS } from './support/peers.ts';

const gate = await clusterTestsGate();

/** The machine's own nftables ruleset (iptables-nft included). */
const hostRuleset = async (): Promise<string> => (await run(NFT, ['list', 'ruleset'])).stdout;

if (gate.reason !== undefined) {
  test.skip(`peer bench (kube-proxy beside drover) skipped: ${gate.reason}`, () => {});
} else {
  const { peers } = gate;
  test('kube-proxy and drover, fed by one API server, each show every change to their own client', async (t) => {
    t.timeout(TIMEOUT_MS);
    const before = await hostRuleset();
    const results = await runPeerBench({
      peers,
      services: [20],
      endpoints: 3,
      changes: 1,
      churnRate: 5,
      churnSeconds: 2,
      settleMs: 500,
      gapMs: 200,
      proxies: [{ impl: 'kube-proxy', mode: 'nftables', minSyncPeriodMs: 0 }, { impl: 'drover', mode: 'nftables' }],
    });
    t.deepEqual(results.map((r) => r.label), ['kube-proxy-nftables-min0', 'drover-nftables']);
    for (const r of results) {
      t.true(r.fullSyncMs > 0 && r.fullSyncMs < 600_000, `${r.label}: full sync ${r.fullSyncMs} ms`);
      for (const kind of CHANGE_KINDS) {
        t.is(r.changes[kind].length, 1, `${r.label}: ${kind}`);
        t.true(r.changes[kind][0]! >= 0 && r.changes[kind][0]! < 120_000, `${r.label}: ${kind} ${r.changes[kind][0]} ms`);
      }
      t.is(r.churn!.writes, 10);
      t.deepEqual(r.churn!.failed, [], `${r.label}: churn changes that never showed`);
      t.is(r.churn!.latenciesMs.length + r.churn!.superseded, 10, `${r.label}: every churn change timed or superseded`);
      t.true(r.rssSteadyKb > 1000 && r.rssPeakKb >= r.rssSteadyKb, `${r.label}: RSS ${r.rssSteadyKb} / ${r.rssPeakKb} kB`);
      t.true(r.cpuSelfS > 0, `${r.label}: CPU ${r.cpuSelfS} s`);
    }
    t.is(await hostRuleset(), before, "the machine's own ruleset is unchanged");
  });
}
