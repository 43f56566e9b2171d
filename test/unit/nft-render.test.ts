/**
 * nftables mode's rendering and planning, pure: the exact script of a full
 * sync onto an empty node, the slots an endpoint change keeps, the element
 * operations of the common changes, and the structure a sync needs.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { planFullSync } from '../../src/modes/nftables/backend.ts';
import { desiredFrontends } from '../../src/modes/nftables/desired.ts';
import { UnsafeElementError } from '../../src/modes/nftables/elements.ts';
import { MAIN, layout } from '../../src/modes/nftables/layout.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import { assignSlots, orderOps, planFrontend, planStructure } from '../../src/modes/nftables/plan.ts';
import { transactionScript } from '../../src/modes/nftables/script.ts';
import { ep, snap, sp } from '../support/snapshots.ts';
import { plannedTable } from '../support/nft-table.ts';

const RENDER = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };
const NODE = { nodePortIPs: ['192.168.1.1'] };
const web = (eps: string[]) => sp('default/web:http', '10.96.0.10', 80, eps.map((e) => ep(e)));
const STATE = snap(web(['10.244.1.2:8080', '10.244.1.3:8080']), sp('default/empty:dns', '10.96.0.11', 53, [], { protocol: 'UDP' }));

/** The model of a table a full sync of `snapshot` wrote onto an empty node. */
function written(snapshot = STATE): TableModel {
  return TableModel.fromLive(plannedTable(snapshot, RENDER, NODE.nodePortIPs));
}

test('a full sync onto an empty node writes the whole table and its elements, exactly', (t) => {
  const empty = new TableModel();
  const plan = planFullSync(empty, STATE, RENDER, NODE, false);
  t.true(plan.structure.rebuild);
  t.is(transactionScript(plan.structure, plan.want, empty, orderOps(plan.ops)), readFileSync(new URL('../fixtures/nftables/render-web.nft', import.meta.url), 'utf8'));
});

test('a second full sync against what the first wrote plans nothing', (t) => {
  const plan = planFullSync(written(), STATE, RENDER, NODE, false);
  t.deepEqual([plan.ops, plan.structure], [[], { rebuild: false, addSets: [], writeChains: [], deleteSets: [], deleteChains: [] }]);
});

test('slots: an endpoint that stays keeps its slot; the last slot moves into a freed one', (t) => {
  t.deepEqual(assignSlots(['a', 'b', 'c'], ['a', 'c']), ['a', 'c']);
  t.deepEqual(assignSlots(['a', 'b', 'c'], ['a', 'b', 'c', 'd']), ['a', 'b', 'c', 'd']);
  t.deepEqual(assignSlots(['c', 'a'], ['a', 'b', 'c']), ['c', 'a', 'b']);
  t.deepEqual(assignSlots(['a', undefined, 'b'], ['a', 'b']), ['a', 'b'], 'a hole of a read-back is filled');
  t.deepEqual(assignSlots(['a', 'a'], ['a', 'b']), ['a', 'b'], 'a duplicate of a read-back is replaced');
});

test('one endpoint removed of three writes its slot and the count sets, nothing else', (t) => {
  const model = written(snap(web(['10.244.1.2:8080', '10.244.1.3:8080', '10.244.1.4:8080'])));
  const ops: ReturnType<typeof orderOps> = [];
  const [f] = desiredFrontends(web(['10.244.1.2:8080', '10.244.1.4:8080']), undefined, NODE);
  planFrontend(model, f!.frontend, f, ops);
  t.deepEqual(orderOps(ops), [
    { op: 'delete', set: 'endpoint-count-3', key: '10.96.0.10 . tcp . 80' },
    { op: 'delete', set: 'endpoints', key: '10.96.0.10 . tcp . 80 . 1' },
    { op: 'delete', set: 'endpoints', key: '10.96.0.10 . tcp . 80 . 2' },
    { op: 'add', set: 'endpoint-count-2', key: '10.96.0.10 . tcp . 80' },
    { op: 'add', set: 'endpoints', key: '10.96.0.10 . tcp . 80 . 1', value: '10.244.1.4 . 8080' },
  ]);
});

test('a service removed deletes every element of its frontend', (t) => {
  const model = written();
  const ops: ReturnType<typeof orderOps> = [];
  planFrontend(model, '10.96.0.10 . tcp . 80', undefined, ops);
  t.deepEqual(orderOps(ops), [
    { op: 'delete', set: 'cluster-ips', key: '10.96.0.10 . tcp . 80' },
    { op: 'delete', set: 'endpoint-count-2', key: '10.96.0.10 . tcp . 80' },
    { op: 'delete', set: 'endpoints', key: '10.96.0.10 . tcp . 80 . 0' },
    { op: 'delete', set: 'endpoints', key: '10.96.0.10 . tcp . 80 . 1' },
    { op: 'delete', set: 'service-ips', key: '10.96.0.10 . tcp . 80' },
  ]);
});

test('structure: a missing set is added, a chain with other rules written again, an unused count set deleted only when pruning', (t) => {
  const model = written();
  model.types.delete('hairpin');
  model.sets.delete('hairpin');
  model.chains.set('masquerading', { comments: [] });
  model.types.set('endpoint-count-7', { keyType: 'ipv4_addr . inet_proto . inet_service' });
  model.sets.set('endpoint-count-7', new Set());
  const want = layout(RENDER, { counts: { main: [2], local: [] }, timeouts: [] });
  const p = planStructure(model, want, true);
  t.deepEqual([p.rebuild, p.addSets.map((s) => s.name), p.writeChains.map((c) => c.name), p.deleteSets, p.deleteChains], [false, ['hairpin'], ['masquerading'], ['endpoint-count-7'], []]);
  t.deepEqual(planStructure(model, want, false).deleteSets, []);
  model.types.set('service-ips', { keyType: 'ipv4_addr' });
  t.true(planStructure(model, want, true).rebuild, 'a set of another type: the table is written again');
});

test('the map slots are counted per selection: an externalTrafficPolicy Local NodePort has both', (t) => {
  const local = sp('default/local:http', '10.96.0.20', 80, [ep('10.244.1.2:8080', { nodeName: 'n1' }), ep('10.244.2.2:8080', { nodeName: 'n2' })], {
    type: 'NodePort',
    externalTrafficPolicy: 'Local',
    frontends: { clusterIPs: [{ family: 'IPv4', ip: '10.96.0.20' }], nodePort: 30080, externalIPs: [], loadBalancerIngress: [], loadBalancerSourceRanges: [] },
  });
  const fs = desiredFrontends(local, { name: 'n1', addresses: [] }, NODE);
  t.deepEqual(
    fs.map((f) => [f.frontend, f.kind, f.targets, f.local]),
    [
      ['10.96.0.20 . tcp . 80', 'cluster', ['10.244.1.2 . 8080', '10.244.2.2 . 8080'], []],
      ['192.168.1.1 . tcp . 30080', 'external', ['10.244.1.2 . 8080', '10.244.2.2 . 8080'], ['10.244.1.2 . 8080']],
    ],
  );
  t.is(MAIN.map, 'endpoints');
});

test('a value that cannot be an element is refused before any text is made', (t) => {
  const bad = { ...web(['10.244.1.2:8080']), clusterIP: '10.96.0.10 } ; flush ruleset ; {' };
  t.throws(() => desiredFrontends(bad, undefined, NODE), { instanceOf: UnsafeElementError, message: /refusing to write IPv4 address/ });
  const badPort = web(['10.244.1.2:0']);
  t.throws(() => desiredFrontends(badPort, undefined, NODE), { instanceOf: UnsafeElementError, message: /port "0"/ });
  t.throws(() => planFullSync(new TableModel(), STATE, { clusterCIDR: '10.244.0.0/16; flush ruleset', masqueradeAll: false }, NODE, false), { instanceOf: UnsafeElementError });
});
