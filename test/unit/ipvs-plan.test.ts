/** IPVS mode's pure planning: desired state from a snapshot, and the diff against the kernel into exact commands. */
import test from 'ava';
import { cidrContains } from '../../src/model/addr.ts';
import type { DestEntry, ServiceEntry } from '../../src/kernel/ipvs/codec.ts';
import { IpvsValidationError } from '../../src/kernel/ipvs/codec.ts';
import { desiredIpvsState, desiredVirtualServers } from '../../src/modes/ipvs/assemble.ts';
import { pendingKey } from '../../src/modes/ipvs/graceful.ts';
import { IpsetValidationError } from '../../src/kernel/ipset/ipset.ts';
import { describeOp, planIpvs, type KernelVirtualServer, type ReconcileContext } from '../../src/modes/ipvs/reconcile.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const web = sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.3:8080'), ep('10.244.1.2:8080'), ep('10.244.1.4:8080', { ready: false })]);
const dns = sp('kube-system/dns:dns', '10.96.0.53', 53, [ep('10.244.2.2:53')], { protocol: 'UDP' });
const sticky = sp('default/sticky:http', '10.96.0.20', 80, [ep('10.244.3.2:80')], { sessionAffinity: { timeoutSeconds: 10800 } });
const empty = sp('default/empty:http', '10.96.0.11', 80, []);

test('desired state: one virtual server per service port, serving endpoints as weight-1 masq real servers', (t) => {
  const d = desiredIpvsState(snap(web, dns, sticky, empty), { scheduler: 'rr' });
  t.deepEqual(
    [...d.virtualServers.values()].map((v) => ({ key: v.key, sp: v.servicePort, vs: v.vs, reals: [...v.reals.values()] })),
    [
      {
        key: 'TCP/10.96.0.10:80',
        sp: 'default/web:http',
        vs: { protocol: 'TCP', address: '10.96.0.10', port: 80, scheduler: 'rr', netmask: 0xffffffff },
        reals: [
          { address: '10.244.1.2', port: 8080, weight: 1, forwarding: 'masq' },
          { address: '10.244.1.3', port: 8080, weight: 1, forwarding: 'masq' },
        ],
      },
      { key: 'TCP/10.96.0.11:80', sp: 'default/empty:http', vs: { protocol: 'TCP', address: '10.96.0.11', port: 80, scheduler: 'rr', netmask: 0xffffffff }, reals: [] },
      {
        key: 'TCP/10.96.0.20:80',
        sp: 'default/sticky:http',
        vs: { protocol: 'TCP', address: '10.96.0.20', port: 80, scheduler: 'rr', persistent: { timeoutSeconds: 10800 }, netmask: 0xffffffff },
        reals: [{ address: '10.244.3.2', port: 80, weight: 1, forwarding: 'masq' }],
      },
      {
        key: 'UDP/10.96.0.53:53',
        sp: 'kube-system/dns:dns',
        vs: { protocol: 'UDP', address: '10.96.0.53', port: 53, scheduler: 'rr', netmask: 0xffffffff },
        reals: [{ address: '10.244.2.2', port: 53, weight: 1, forwarding: 'masq' }],
      },
    ],
  );
  t.deepEqual(d.addresses, ['10.96.0.10', '10.96.0.11', '10.96.0.20', '10.96.0.53']);
  t.deepEqual([...d.clusterIPSet].sort(), ['10.96.0.10,tcp:80', '10.96.0.11,tcp:80', '10.96.0.20,tcp:80', '10.96.0.53,udp:53']);
  t.deepEqual([...d.loopBackSet].sort(), ['10.244.1.2,tcp:8080,10.244.1.2', '10.244.1.3,tcp:8080,10.244.1.3', '10.244.2.2,udp:53,10.244.2.2', '10.244.3.2,tcp:80,10.244.3.2']);
  t.deepEqual(d.conflicts, []);
});

test('desired state: the scheduler option reaches every virtual server', (t) => {
  const { servers } = desiredVirtualServers(snap(web, dns), { scheduler: 'wlc' });
  t.deepEqual([...servers.values()].map((s) => s.vs.scheduler), ['wlc', 'wlc']);
});

test('desired state: a second service port on the same ClusterIP:port/protocol is left out and named', (t) => {
  const twin = sp('default/twin:http', '10.96.0.10', 80, [ep('10.244.9.9:80')]);
  const d = desiredIpvsState(snap(web, twin), { scheduler: 'rr' });
  t.deepEqual([...d.virtualServers.values()].map((v) => v.servicePort), ['default/twin:http']);
  t.deepEqual(d.conflicts, ['default/web:http']);
});

test('desired state: a bad value never reaches netlink', (t) => {
  t.throws(() => desiredIpvsState(snap(sp('default/x:y', '10.96.0.300', 80, [])), { scheduler: 'rr' }), { instanceOf: IpvsValidationError });
  t.throws(() => desiredIpvsState(snap(sp('default/x:y', '10.96.0.3', 80, [ep('10.244.1.2:0')])), { scheduler: 'rr' }), { instanceOf: IpsetValidationError });
  t.throws(() => desiredIpvsState(snap(sp('default/x:y', '10.96.0.3', 80, [ep('10.244.1.2 -j:80')])), { scheduler: 'rr' }), { instanceOf: IpsetValidationError });
  t.throws(() => desiredIpvsState(snap(web), { scheduler: 'r r' }), { instanceOf: IpvsValidationError });
});

test('cidrContains', (t) => {
  t.true(cidrContains('10.96.0.0/12', '10.111.255.255'));
  t.false(cidrContains('10.96.0.0/12', '10.112.0.0'));
  t.true(cidrContains('0.0.0.0/0', '1.2.3.4'));
  t.true(cidrContains('10.96.0.10/32', '10.96.0.10'));
});

// ---------------------------------------------------------------------------
// Diff against the kernel
// ---------------------------------------------------------------------------

function entry(key: string, extra: Partial<ServiceEntry> = {}): ServiceEntry {
  const m = /^(TCP|UDP|SCTP)\/([\d.]+):(\d+)$/.exec(key)!;
  return { protocol: m[1] as 'TCP', address: m[2]!, port: Number(m[3]), scheduler: 'rr', netmask: 0xffffffff, flags: 2, ...extra };
}

function dest(target: string, extra: Partial<DestEntry> = {}): DestEntry {
  const [address, port] = target.split(':');
  return {
    address: address!,
    port: Number(port),
    weight: 1,
    forwarding: 'masq',
    upperThreshold: 0,
    lowerThreshold: 0,
    activeConns: 0,
    inactiveConns: 0,
    persistConns: 0,
    ...extra,
  };
}

function kernelOf(...vss: [string, DestEntry[], Partial<ServiceEntry>?][]): Map<string, KernelVirtualServer> {
  return new Map(vss.map(([key, dests, extra]) => [key, { entry: entry(key, extra), dests }]));
}

const ctx = (extra: Partial<ReconcileContext> = {}): ReconcileContext => ({
  owned: (vs) => cidrContains('10.96.0.0/12', vs.address),
  pending: new Map(),
  now: 1_000_000,
  gracefulPeriodMs: 900_000,
  ...extra,
});

const desired = (...ports: ReturnType<typeof sp>[]) => desiredVirtualServers(snap(...ports), { scheduler: 'rr' }).servers;

test('diff: an empty kernel gets every virtual server, then every real server', (t) => {
  const plan = planIpvs(desired(web, empty, sticky), new Map(), ctx());
  t.deepEqual(plan.ops.map(describeOp), [
    'add-service TCP/10.96.0.10:80 rr',
    'add-service TCP/10.96.0.11:80 rr',
    'add-service TCP/10.96.0.20:80 rr persistent 10800',
    'add-dest TCP/10.96.0.10:80 -> 10.244.1.2:8080 w1',
    'add-dest TCP/10.96.0.10:80 -> 10.244.1.3:8080 w1',
    'add-dest TCP/10.96.0.20:80 -> 10.244.3.2:80 w1',
  ]);
});

test('diff: a kernel that matches gives no command (restart adoption)', (t) => {
  const kernel = kernelOf(
    ['TCP/10.96.0.10:80', [dest('10.244.1.3:8080'), dest('10.244.1.2:8080', { activeConns: 3 })]],
    ['TCP/10.96.0.11:80', []],
    ['TCP/10.96.0.20:80', [dest('10.244.3.2:80')], { persistent: { timeoutSeconds: 10800 }, flags: 3 }],
  );
  t.deepEqual(planIpvs(desired(web, empty, sticky), kernel, ctx()).ops, []);
});

test('diff: stale weights are reset, a changed scheduler or persistence is edited in place', (t) => {
  const kernel = kernelOf(
    ['TCP/10.96.0.10:80', [dest('10.244.1.2:8080', { weight: 0 }), dest('10.244.1.3:8080', { weight: 5 })], { scheduler: 'wlc' }],
    ['TCP/10.96.0.20:80', [dest('10.244.3.2:80', { forwarding: 'route' })], { persistent: { timeoutSeconds: 60 }, flags: 3 }],
  );
  t.deepEqual(planIpvs(desired(web, sticky), kernel, ctx()).ops.map(describeOp), [
    'edit-service TCP/10.96.0.10:80 rr',
    'edit-service TCP/10.96.0.20:80 rr persistent 10800',
    'edit-dest TCP/10.96.0.10:80 -> 10.244.1.2:8080 w1',
    'edit-dest TCP/10.96.0.10:80 -> 10.244.1.3:8080 w1',
    'edit-dest TCP/10.96.0.20:80 -> 10.244.3.2:80 w1',
  ]);
  // Persistence removed: the flag is cleared.
  const plain = sp('default/sticky:http', '10.96.0.20', 80, [ep('10.244.3.2:80')]);
  t.deepEqual(
    planIpvs(desired(plain), kernelOf(['TCP/10.96.0.20:80', [dest('10.244.3.2:80')], { persistent: { timeoutSeconds: 10800 }, flags: 3 }]), ctx()).ops.map(describeOp),
    ['edit-service TCP/10.96.0.20:80 rr'],
  );
});

test('diff: unwanted virtual servers are deleted only inside the service CIDR', (t) => {
  const kernel = kernelOf(
    ['TCP/10.96.0.10:80', [dest('10.244.1.2:8080'), dest('10.244.1.3:8080')]],
    ['TCP/10.96.5.5:8080', [dest('10.244.7.7:80')]],
    ['TCP/192.168.1.1:80', [dest('10.0.0.1:80')]],
  );
  t.deepEqual(planIpvs(desired(web), kernel, ctx()).ops.map(describeOp), ['del-service TCP/10.96.5.5:8080']);
});

test('diff: a missing real server is added, an extra one without connections is deleted at once', (t) => {
  const kernel = kernelOf(['TCP/10.96.0.10:80', [dest('10.244.1.2:8080'), dest('10.244.1.9:8080')]]);
  const plan = planIpvs(desired(web), kernel, ctx());
  t.deepEqual(plan.ops.map(describeOp), ['add-dest TCP/10.96.0.10:80 -> 10.244.1.3:8080 w1', 'del-dest TCP/10.96.0.10:80 -> 10.244.1.9:8080']);
  t.deepEqual([...plan.pending.keys()], []);
});

test('diff: a removed TCP real server with connections is quiesced and put on the pending list', (t) => {
  const kernel = kernelOf(['TCP/10.96.0.10:80', [dest('10.244.1.2:8080'), dest('10.244.1.3:8080', { activeConns: 1, inactiveConns: 2 })]]);
  const fewer = sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]);
  const plan = planIpvs(desired(fewer), kernel, ctx());
  t.deepEqual(plan.ops, [
    { kind: 'quiesce-dest', vs: { protocol: 'TCP', address: '10.96.0.10', port: 80 }, rs: { address: '10.244.1.3', port: 8080, weight: 0, forwarding: 'masq', upperThreshold: 0, lowerThreshold: 0 } },
  ]);
  t.deepEqual([...plan.pending.values()], [{ vs: { protocol: 'TCP', address: '10.96.0.10', port: 80 }, rs: { address: '10.244.1.3', port: 8080 }, since: 1_000_000 }]);
});

test('diff: a removed UDP real server is deleted at once, connections or not', (t) => {
  const kernel = kernelOf(['UDP/10.96.0.53:53', [dest('10.244.2.2:53', { activeConns: 0, inactiveConns: 7 }), dest('10.244.2.3:53', { inactiveConns: 4 })]]);
  t.deepEqual(planIpvs(desired(dns), kernel, ctx()).ops.map(describeOp), ['del-dest UDP/10.96.0.53:53 -> 10.244.2.3:53']);
});

test('diff: a pending real server waits, then is deleted when the period is over', (t) => {
  const fewer = sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]);
  const kernel = kernelOf(['TCP/10.96.0.10:80', [dest('10.244.1.2:8080'), dest('10.244.1.3:8080', { weight: 0, activeConns: 1 })]]);
  const vs = { protocol: 'TCP' as const, address: '10.96.0.10', port: 80 };
  const pending = new Map([[pendingKey(vs, { address: '10.244.1.3', port: 8080 }), { vs, rs: { address: '10.244.1.3', port: 8080 }, since: 100_000 }]]);
  const waiting = planIpvs(desired(fewer), kernel, ctx({ pending, now: 999_999 }));
  t.deepEqual(waiting.ops, []);
  t.is(waiting.pending.size, 1);
  const expired = planIpvs(desired(fewer), kernel, ctx({ pending, now: 1_000_000 }));
  t.deepEqual(expired.ops.map(describeOp), ['del-dest TCP/10.96.0.10:80 -> 10.244.1.3:8080']);
  t.is(expired.pending.size, 0);
});

test('diff: an endpoint that comes back while pending is restored to weight 1 and leaves the list', (t) => {
  const kernel = kernelOf(['TCP/10.96.0.10:80', [dest('10.244.1.2:8080'), dest('10.244.1.3:8080', { weight: 0, activeConns: 1 })]]);
  const vs = { protocol: 'TCP' as const, address: '10.96.0.10', port: 80 };
  const pending = new Map([[pendingKey(vs, { address: '10.244.1.3', port: 8080 }), { vs, rs: { address: '10.244.1.3', port: 8080 }, since: 100_000 }]]);
  const plan = planIpvs(desired(web), kernel, ctx({ pending }));
  t.deepEqual(plan.ops.map(describeOp), ['edit-dest TCP/10.96.0.10:80 -> 10.244.1.3:8080 w1']);
  t.is(plan.pending.size, 0);
});

test('diff: a deleted virtual server forgets its pending real servers; a kernel-gone real server too', (t) => {
  const vs = { protocol: 'TCP' as const, address: '10.96.0.10', port: 80 };
  const other = { protocol: 'TCP' as const, address: '10.96.0.11', port: 80 };
  const pending = new Map([
    [pendingKey(vs, { address: '10.244.1.3', port: 8080 }), { vs, rs: { address: '10.244.1.3', port: 8080 }, since: 1 }],
    [pendingKey(other, { address: '10.244.1.9', port: 80 }), { vs: other, rs: { address: '10.244.1.9', port: 80 }, since: 1 }],
  ]);
  const kernel = kernelOf(['TCP/10.96.0.10:80', [dest('10.244.1.3:8080', { weight: 0, activeConns: 1 })]], ['TCP/10.96.0.11:80', []]);
  const plan = planIpvs(desired(empty), kernel, ctx({ pending }));
  t.deepEqual(plan.ops.map(describeOp), ['del-service TCP/10.96.0.10:80']);
  t.is(plan.pending.size, 0);
});

test('diff: scope is what is passed in; virtual servers outside it are not touched', (t) => {
  // A partial sync passes only the changed service ports' virtual servers.
  const kernel = kernelOf(['TCP/10.96.0.10:80', [dest('10.244.1.2:8080'), dest('10.244.1.3:8080')]]);
  t.deepEqual(planIpvs(new Map(), kernel, ctx({ owned: () => false })).ops, []);
});

test('diff: a withheld virtual server drains its TCP real servers before it goes; with none connected it is deleted alone', (t) => {
  const withheld = ctx({ withheld: (key) => key === 'TCP/10.96.0.20:80' });
  const draining = kernelOf(['TCP/10.96.0.20:80', [dest('10.244.1.2:8080', { activeConns: 1 }), dest('10.244.1.3:8080')]]);
  const plan = planIpvs(new Map(), draining, withheld);
  t.deepEqual(plan.ops.map(describeOp), ['quiesce-dest TCP/10.96.0.20:80 -> 10.244.1.2:8080 w0', 'del-dest TCP/10.96.0.20:80 -> 10.244.1.3:8080']);
  t.deepEqual([...plan.pending.keys()], ['TCP/10.96.0.20:80 -> 10.244.1.2:8080']);
  // No connection left: the virtual server is deleted with its real servers, in one command, and forgotten.
  const idle = kernelOf(['TCP/10.96.0.20:80', [dest('10.244.1.2:8080', { weight: 0 })]]);
  const done = planIpvs(new Map(), idle, ctx({ ...withheld, pending: plan.pending }));
  t.deepEqual(done.ops.map(describeOp), ['del-service TCP/10.96.0.20:80']);
  t.is(done.pending.size, 0);
  // Not withheld (its service port is gone): deleted at once, as before.
  t.deepEqual(planIpvs(new Map(), draining, ctx()).ops.map(describeOp), ['del-service TCP/10.96.0.20:80']);
});
