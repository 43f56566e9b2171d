/**
 * drover's Kubernetes source when the real API server goes away and comes
 * back, in throw-away network namespaces with real connections:
 *
 *   - kube-apiserver restarted (its etcd data kept) while traffic runs:
 *     nothing is deleted, no connection fails, drover watches again and
 *     follows the changes made after the restart;
 *   - etcd compacted past drover's resourceVersion while drover's watches
 *     are cut: kube-apiserver (without its watch cache, so that a watch
 *     reads etcd's history) answers the watch from that resourceVersion
 *     with 410 Gone, and drover lists again, without reprogramming the
 *     objects that did not change. kube-apiserver's audit log shows what
 *     drover asked for; the same restart without the compaction, first,
 *     shows a watch resumed with no list.
 */
import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTraffic } from '../../src/testbed/probe.ts';
import { drover, finish, startDrover, synced, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';
import { auditFlags, requestedVersion, type Audit, type AuditEvent } from './support/audit.ts';
import { clusterTestsGate, TIMEOUT_MS } from './support/peers.ts';
import { clusterWorld, DROVER_USER, NS, type ClusterWorld } from './support/world.ts';

const gate = await clusterTestsGate();
const WEB = '10.96.20.20';

if (gate.reason !== undefined) {
  test.skip(`cluster tests (the real API server restarted and compacted) skipped: ${gate.reason}`, () => {});
} else {
  const { peers } = gate;

  /** A world with Service shop/web (WEB:80 → b1, b2) and `drover run` synced on it, stopped when the test ends. */
  const served = async (t: import('ava').ExecutionContext, w: ClusterWorld): Promise<RunningDrover> => {
    await w.service('web', { clusterIP: WEB });
    await w.slice('web', 'web-abcde', [w.ep('b1'), w.ep('b2')]);
    const d = startDrover([...w.sourceFlags(), ...w.runFlags('main')]);
    t.teardown(() => d.stop());
    await synced(d, 1, 120_000);
    await w.eventually('the first sync', WEB, 80, 'b1,b2');
    return d;
  };
  /** drover's diff of the kernel against the API server: "no differences". */
  const converged = async (t: import('ava').ExecutionContext, w: ClusterWorld) => {
    const r = await drover(['diff', ...w.sourceFlags(), '--list-timeout', '60s']);
    t.deepEqual([r.code, r.stdout], [0, 'no differences\n'], r.stderr);
  };

  test.serial('kube-apiserver restarted with its data while traffic runs: nothing is deleted, drover watches again and follows later changes', async (t) => {
    t.timeout(TIMEOUT_MS);
    const auditDir = await mkdtemp(join(tmpdir(), 'drover-audit-'));
    t.teardown(() => rm(auditDir, { recursive: true, force: true }));
    const audit = await auditFlags(auditDir, DROVER_USER);
    const w = await clusterWorld(peers, { backends: 3, apiserverArgs: audit.flags });
    t.teardown(() => w.destroy());
    const d = await served(t, w);
    const mark = (await audit.events()).length;
    const load = await startTraffic(w.topo, { from: w.topo.client('outside').netns, host: WEB, port: 80, held: 4, intervalMs: 100, timeoutMs: 3000, heldTimeoutMs: 5000 });
    t.teardown(() => load.stop().then(() => {}, () => {}));

    await w.api.restart();
    // Once kube-apiserver is back, a change made through it reaches the kernel.
    await w.slice('web', 'web-abcde', [w.ep('b1'), w.ep('b2'), w.ep('b3')]);
    await w.eventually('the change after the restart', WEB, 80, 'b1,b2,b3', 120_000);
    const s = await finish(t, 'kube-apiserver restart', load);
    t.is(s.failed, 0, 'no new connection failed while kube-apiserver was away');
    await converged(t, w);
    t.is(d.lines(/full sync done/).length, 1, 'one full sync: the first');
    // With its watch cache (the default), kube-apiserver starts its history anew: a watch from before the restart gets 410 Gone.
    const after = await since(audit, mark);
    t.log(`after the restart: ${lists(after, 'services').length} list(s) of Services, ${watches(after, 'services').filter((e) => e.stage === 'ResponseStarted').length} watch(es)`);
    t.true(d.alive);
  });

  test.serial("etcd compacted past drover's resourceVersion: the watch gets 410 and drover lists again, reprogramming only what changed", async (t) => {
    t.timeout(TIMEOUT_MS);
    const auditDir = await mkdtemp(join(tmpdir(), 'drover-audit-'));
    t.teardown(() => rm(auditDir, { recursive: true, force: true }));
    const audit = await auditFlags(auditDir, DROVER_USER);
    const w = await clusterWorld(peers, { backends: 3, apiserverArgs: ['--watch-cache=false', ...audit.flags] });
    t.teardown(() => w.destroy());
    const d = await served(t, w);
    await w.service('other', { clusterIP: '10.96.20.21' });
    await w.slice('other', 'other-abcde', [w.ep('b3')]);
    await w.eventually('a second Service', '10.96.20.21', 80, 'b3');

    // The same restart without a compaction: the watches resume from their resourceVersion, with no list.
    let mark = (await audit.events()).length;
    await w.api.restart();
    await until('drover watching Services and EndpointSlices again', async () => {
      const e = await since(audit, mark);
      return watches(e, 'services').length > 0 && watches(e, 'endpointslices').length > 0;
    }, 120_000, 250);
    t.deepEqual(lists(await since(audit, mark), 'services').map((e) => e.requestURI), [], 'no list of Services after a restart without compaction');
    t.deepEqual(lists(await since(audit, mark), 'endpointslices').map((e) => e.requestURI), [], 'no list of EndpointSlices either');

    // Compacted past every resourceVersion drover holds (a write elsewhere moves etcd's revision past them),
    // then restarted: the watches from those resourceVersions get 410 Gone, and drover lists again.
    const held = Math.max(...watches(await since(audit, mark), 'services').map((e) => Number(requestedVersion(e))));
    await w.api.must('POST', '/api/v1/namespaces/default/configmaps', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'bump' } });
    const compacted = await w.api.compactEtcd();
    t.true(compacted > held, `etcd compacted at revision ${compacted}, past the Services' resourceVersion ${held}`);
    const syncs = d.lines(/sync done/).length;
    mark = (await audit.events()).length;
    await w.api.restart();
    await until('drover listing Services and EndpointSlices again', async () => {
      const e = await since(audit, mark);
      return lists(e, 'services').length > 0 && lists(e, 'endpointslices').length > 0;
    }, 120_000, 250);
    const after = await since(audit, mark);
    const expired = watches(after, 'services').filter((e) => Number(requestedVersion(e)) <= held);
    t.true(expired.length > 0, 'drover watched from its old resourceVersion first');
    const firstList = after.indexOf(lists(after, 'services')[0]!);
    t.log(`after the compaction at ${compacted}: watch ${expired[0]!.requestURI}, then list ${after[firstList]!.requestURI}`);
    t.true(after.indexOf(expired[0]!) < firstList, 'and listed only after that watch');

    // Nothing changed: no sync rewrote anything; a change after the relist is a partial sync of that Service alone.
    await w.slice('other', 'other-abcde', [w.ep('b2')]);
    await w.eventually('the change after the relist', '10.96.20.21', 80, 'b2');
    const later = d.lines(/sync done/).slice(syncs);
    t.deepEqual(later.filter((l) => l.full === true), [], 'no full sync');
    t.deepEqual([...new Set(later.flatMap((l) => (l.changed as string[] | undefined) ?? []))], [`${NS}/other:http`], 'only the changed Service was reprogrammed');
    t.is(await w.reached(WEB, 80), 'b1,b2', 'the unchanged Service is served');
    await converged(t, w);
  });

  /** The audit events logged after the first `mark`. */
  async function since(audit: Audit, mark: number): Promise<AuditEvent[]> {
    return (await audit.events()).slice(mark);
  }
  /** drover's completed lists of `resource`. */
  function lists(events: AuditEvent[], resource: string): AuditEvent[] {
    return events.filter((e) => e.verb === 'list' && e.objectRef?.resource === resource && e.stage === 'ResponseComplete');
  }
  /** drover's watches of `resource` (each logged at ResponseStarted and at ResponseComplete). */
  function watches(events: AuditEvent[], resource: string): AuditEvent[] {
    return events.filter((e) => e.verb === 'watch' && e.objectRef?.resource === resource);
  }
}
