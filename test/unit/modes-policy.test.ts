/** Both modes program the endpoint policy's cluster set (model/policy.ts), with the snapshot's node. */
import test from 'ava';
import { renderSnapshot } from '../../src/modes/iptables/ruleset.ts';
import { desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import { countServingEndpoints } from '../../src/model/policy.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const terminating = { ready: false, serving: true, terminating: true } as const;

/** A zone-hinted service (zone-a: .1, zone-b: .2) and one whose endpoints all serve while terminating. */
function snapshot(node: Snapshot['node']): Snapshot {
  const s = snap(
    sp('ns/zoned', '10.96.0.1', 80, [ep('10.1.0.1:80', { zoneHints: ['zone-a'] }), ep('10.1.0.2:80', { zoneHints: ['zone-b'] })]),
    sp('ns/ending', '10.96.0.2', 80, [ep('10.1.0.3:80', terminating), ep('10.1.0.4:80', { ...terminating, serving: false })]),
  );
  return node === undefined ? s : { ...s, node };
}

const iptablesTargets = (s: Snapshot, key: string) =>
  [...renderSnapshot(s, { masqueradeAll: false }).get(key)!.chains.values()].flat().flatMap((r) => /--to-destination (\S+)/.exec(r)?.[1] ?? []);
const ipvsReals = (s: Snapshot, key: string) =>
  [...desiredIpvsState(s, { scheduler: 'rr' }).virtualServers.values()].filter((v) => v.servicePort === key).flatMap((v) => [...v.reals.keys()]);

test('zone hints apply when the snapshot has a node in a hinted zone, in both modes', (t) => {
  const inZoneB = snapshot({ name: 'n1', zone: 'zone-b', addresses: [] });
  t.deepEqual(iptablesTargets(inZoneB, 'ns/zoned'), ['10.1.0.2:80']);
  t.deepEqual(ipvsReals(inZoneB, 'ns/zoned'), ['10.1.0.2:80']);
  const noNode = snapshot(undefined);
  t.deepEqual(iptablesTargets(noNode, 'ns/zoned'), ['10.1.0.1:80', '10.1.0.2:80']);
  t.deepEqual(ipvsReals(noNode, 'ns/zoned'), ['10.1.0.1:80', '10.1.0.2:80']);
});

test('with no ready endpoint, serving-terminating ones are programmed in both modes and counted', (t) => {
  const s = snapshot(undefined);
  t.deepEqual(iptablesTargets(s, 'ns/ending'), ['10.1.0.3:80']);
  t.deepEqual(ipvsReals(s, 'ns/ending'), ['10.1.0.3:80']);
  t.is(countServingEndpoints(s), 3);
});
