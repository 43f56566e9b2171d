/** The ipsets of IPVS mode: entries, `ipset save` parsing, and the exact `ipset restore -exist` input. */
import test from 'ava';
import { EMPTY_FRONTEND_SETS } from '../support/ipvs-sets.ts';
import { FakeIpset } from '../../src/kernel/ipset/fake.ts';
import {
  CLUSTER_IP_SET,
  clusterIPEntry,
  IpsetTypeError,
  IPVS_SETS,
  LOOP_BACK_SET,
  loopBackEntry,
  parseIpsetSave,
  planIpsetDestroy,
  planIpsetRestore,
} from '../../src/modes/ipvs/ipset.ts';
import { IpsetValidationError, type SavedSet } from '../../src/kernel/ipset/ipset.ts';

test('entries are printed the way ipset save prints them', (t) => {
  t.is(clusterIPEntry('10.96.0.10', 'TCP', 80), '10.96.0.10,tcp:80');
  t.is(clusterIPEntry('10.96.0.53', 'UDP', 53), '10.96.0.53,udp:53');
  t.is(loopBackEntry('10.244.1.2', 'TCP', 8080), '10.244.1.2,tcp:8080,10.244.1.2');
  t.is(loopBackEntry('10.244.1.2', 'SCTP', 3868), '10.244.1.2,sctp:3868,10.244.1.2');
});

test('entries are validated: nothing can add a line or an option', (t) => {
  t.throws(() => clusterIPEntry('10.96.0.1\nflush', 'TCP', 80), { instanceOf: IpsetValidationError });
  t.throws(() => clusterIPEntry('10.96.0.256', 'TCP', 80), { instanceOf: IpsetValidationError });
  t.throws(() => clusterIPEntry('10.96.0.1', 'icmp', 80), { instanceOf: IpsetValidationError });
  t.throws(() => loopBackEntry('10.244.1.2', 'TCP', 0), { instanceOf: IpsetValidationError });
  t.throws(() => planIpsetRestore({ [CLUSTER_IP_SET]: ['10.96.0.1,tcp:80 -exist'], [LOOP_BACK_SET]: [] }, new Map()), { instanceOf: IpsetValidationError });
});

/** The frontend sets (ipset.ts), as present and empty: the tests below are about KUBE-CLUSTER-IP and KUBE-LOOP-BACK. */
const FRONTEND_SETS = IPVS_SETS.filter((s) => s.name !== CLUSTER_IP_SET && s.name !== LOOP_BACK_SET);
const withFrontendSets = (current: Map<string, SavedSet>): Map<string, SavedSet> =>
  new Map([...current, ...FRONTEND_SETS.map((s): [string, SavedSet] => [s.name, { type: s.type, entries: new Set() }])]);

const SAVE = `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1a2b3c4d
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
add KUBE-CLUSTER-IP 10.96.0.99,tcp:80
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5e6f7a8b
add KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2
create OTHER hash:ip family inet hashsize 1024 maxelem 65536
add OTHER 1.2.3.4
`;

test('parse ipset save: only drover sets, with type and entries', (t) => {
  const sets = parseIpsetSave(SAVE);
  t.deepEqual([...sets.keys()], [CLUSTER_IP_SET, LOOP_BACK_SET]);
  t.is(sets.get(CLUSTER_IP_SET)!.type, 'hash:ip,port');
  t.deepEqual([...sets.get(CLUSTER_IP_SET)!.entries], ['10.96.0.10,tcp:80', '10.96.0.99,tcp:80']);
  t.deepEqual([...sets.get(LOOP_BACK_SET)!.entries], ['10.244.1.2,tcp:8080,10.244.1.2']);
});

test('restore input: create missing sets, then entries, sorted', (t) => {
  const plan = planIpsetRestore(
    { [CLUSTER_IP_SET]: ['10.96.0.11,tcp:80', '10.96.0.10,tcp:80'], [LOOP_BACK_SET]: ['10.244.1.2,tcp:8080,10.244.1.2'] },
    new Map(),
  );
  t.is(
    plan.input,
    [
      'create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536',
      'add KUBE-CLUSTER-IP 10.96.0.10,tcp:80',
      'add KUBE-CLUSTER-IP 10.96.0.11,tcp:80',
      'create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536',
      'add KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2',
      ...EMPTY_FRONTEND_SETS,
      '',
    ].join('\n'),
  );
  t.deepEqual({ created: plan.created, added: plan.added, deleted: plan.deleted }, { created: 19, added: 3, deleted: 0 });
});

test('restore input: only the differences against the read-back', (t) => {
  const plan = planIpsetRestore(
    { [CLUSTER_IP_SET]: ['10.96.0.10,tcp:80', '10.96.0.11,tcp:80'], [LOOP_BACK_SET]: ['10.244.1.2,tcp:8080,10.244.1.2'] },
    withFrontendSets(parseIpsetSave(SAVE)),
  );
  t.is(plan.input, 'del KUBE-CLUSTER-IP 10.96.0.99,tcp:80\nadd KUBE-CLUSTER-IP 10.96.0.11,tcp:80\n');
  const same = planIpsetRestore(
    { [CLUSTER_IP_SET]: ['10.96.0.10,tcp:80', '10.96.0.99,tcp:80'], [LOOP_BACK_SET]: ['10.244.1.2,tcp:8080,10.244.1.2'] },
    withFrontendSets(parseIpsetSave(SAVE)),
  );
  t.is(same.input, '');
});

test('a set of drover with the wrong type is reported, not overwritten', (t) => {
  const error = t.throws(
    () => planIpsetRestore({ [CLUSTER_IP_SET]: [], [LOOP_BACK_SET]: [] }, parseIpsetSave('create KUBE-CLUSTER-IP hash:ip family inet\n')),
    { instanceOf: IpsetTypeError },
  );
  t.regex(error!.message, /KUBE-CLUSTER-IP exists with type hash:ip, drover needs hash:ip,port/);
});

test('destroy input names only the sets that exist', (t) => {
  t.is(planIpsetDestroy(parseIpsetSave(SAVE)), 'destroy KUBE-CLUSTER-IP\ndestroy KUBE-LOOP-BACK\n');
  t.is(planIpsetDestroy(new Map()), '');
});

test('the fake ipset applies the plan and reads back equal', async (t) => {
  const ipset = new FakeIpset();
  const want = { [CLUSTER_IP_SET]: ['10.96.0.10,tcp:80'], [LOOP_BACK_SET]: ['10.244.1.2,tcp:8080,10.244.1.2'] };
  await ipset.restore(planIpsetRestore(want, parseIpsetSave(await ipset.save())).input);
  t.is(planIpsetRestore(want, parseIpsetSave(await ipset.save())).input, '');
  t.deepEqual(ipset.entries(CLUSTER_IP_SET), ['10.96.0.10,tcp:80']);
});

const FOREIGN_SAVE = `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1a2b3c4d
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
add KUBE-CLUSTER-IP 10.96.0.10,icmp:echo-request
add KUBE-CLUSTER-IP 10.96.0.99,tcp:80
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5e6f7a8b
add KUBE-LOOP-BACK 10.244.1.2,tcp:8080,10.244.1.2
`;

test('a set holding an entry drover cannot write back is rebuilt and swapped in; the entry is never echoed', (t) => {
  const plan = planIpsetRestore(
    { [CLUSTER_IP_SET]: ['10.96.0.11,tcp:80', '10.96.0.10,tcp:80'], [LOOP_BACK_SET]: ['10.244.1.2,tcp:8080,10.244.1.2'] },
    withFrontendSets(parseIpsetSave(FOREIGN_SAVE)),
  );
  t.is(
    plan.input,
    [
      'create KUBE-CLUSTER-IP-SWAP hash:ip,port family inet hashsize 1024 maxelem 65536',
      'add KUBE-CLUSTER-IP-SWAP 10.96.0.10,tcp:80',
      'add KUBE-CLUSTER-IP-SWAP 10.96.0.11,tcp:80',
      'swap KUBE-CLUSTER-IP-SWAP KUBE-CLUSTER-IP',
      'destroy KUBE-CLUSTER-IP-SWAP',
      '',
    ].join('\n'),
  );
  t.deepEqual(plan.rebuilt, [CLUSTER_IP_SET]);
  t.deepEqual(plan.extra, [
    { set: CLUSTER_IP_SET, entry: '10.96.0.10,icmp:echo-request' },
    { set: CLUSTER_IP_SET, entry: '10.96.0.99,tcp:80' },
  ]);
  t.deepEqual(plan.missing, [{ set: CLUSTER_IP_SET, entry: '10.96.0.11,tcp:80' }]);
  t.deepEqual({ created: plan.created, added: plan.added, deleted: plan.deleted }, { created: 0, added: 1, deleted: 2 });
});

test('a scratch set left over by an interrupted rebuild is destroyed; cleanup destroys it too', (t) => {
  const save = `${SAVE}create KUBE-LOOP-BACK-SWAP hash:ip,port,ip family inet hashsize 1024 maxelem 65536\nadd KUBE-LOOP-BACK-SWAP 10.244.9.9,tcp:1,10.244.9.9\n`;
  const plan = planIpsetRestore(
    { [CLUSTER_IP_SET]: ['10.96.0.10,tcp:80', '10.96.0.99,tcp:80'], [LOOP_BACK_SET]: ['10.244.1.2,tcp:8080,10.244.1.2'] },
    withFrontendSets(parseIpsetSave(save)),
  );
  t.is(plan.input, 'destroy KUBE-LOOP-BACK-SWAP\n');
  t.deepEqual(plan.leftovers, ['KUBE-LOOP-BACK-SWAP']);
  t.is(planIpsetDestroy(parseIpsetSave(save)), 'destroy KUBE-CLUSTER-IP\ndestroy KUBE-LOOP-BACK\ndestroy KUBE-LOOP-BACK-SWAP\n');
});

test('a set of drover created for IPv6 is reported, not overwritten', (t) => {
  const error = t.throws(
    () => planIpsetRestore({ [CLUSTER_IP_SET]: [], [LOOP_BACK_SET]: [] }, parseIpsetSave('create KUBE-LOOP-BACK hash:ip,port,ip family inet6 hashsize 1024\n')),
    { instanceOf: IpsetTypeError },
  );
  t.is(
    error!.message,
    'ipset KUBE-LOOP-BACK exists with type hash:ip,port,ip family inet6, drover needs hash:ip,port,ip family inet: remove it with drover cleanup --mode ipvs (which first deletes the rules that use it) and restart drover',
  );
});

test('the fake ipset rebuilds a set with a foreign entry and reads back equal', async (t) => {
  const ipset = new FakeIpset();
  ipset.setEntries(CLUSTER_IP_SET, 'hash:ip,port', ['10.96.0.10,icmp:echo-request', '10.96.0.10,tcp:80']);
  const want = { [CLUSTER_IP_SET]: ['10.96.0.10,tcp:80', '10.96.0.11,tcp:80'], [LOOP_BACK_SET]: [] };
  await ipset.restore(planIpsetRestore(want, parseIpsetSave(await ipset.save())).input);
  t.deepEqual(ipset.entries(CLUSTER_IP_SET), ['10.96.0.10,tcp:80', '10.96.0.11,tcp:80']);
  t.is(ipset.entries('KUBE-CLUSTER-IP-SWAP'), undefined);
  t.is(planIpsetRestore(want, parseIpsetSave(await ipset.save())).input, '');
});
