/** Graceful termination of real servers (kube-proxy graceful_termination.go): the pure state machine. */
import test from 'ava';
import type { DestEntry } from '../../src/kernel/ipvs/codec.ts';
import { checkPending, needsGracefulTermination, pendingKey, removalDecision, type PendingRemoval } from '../../src/modes/ipvs/graceful.ts';

const vs = { protocol: 'TCP' as const, address: '10.96.0.10', port: 80 };
const rs = { address: '10.244.1.3', port: 8080 };
const conns = (active: number, inactive: number, weight = 1) => ({ weight, activeConns: active, inactiveConns: inactive });
const PERIOD = 15 * 60_000;

test('only TCP real servers are drained; UDP and SCTP are deleted at once (as kube-proxy)', (t) => {
  t.true(needsGracefulTermination('TCP'));
  t.false(needsGracefulTermination('UDP'));
  t.false(needsGracefulTermination('SCTP'));
  t.is(removalDecision('UDP', conns(5, 5), undefined, 0, PERIOD), 'delete');
  t.is(removalDecision('SCTP', conns(5, 5), undefined, 0, PERIOD), 'delete');
});

test('weight 1 with connections → quiesce; weight 0 pending → wait; no connections → delete', (t) => {
  t.is(removalDecision('TCP', conns(1, 0), undefined, 0, PERIOD), 'quiesce');
  t.is(removalDecision('TCP', conns(0, 1), undefined, 0, PERIOD), 'quiesce');
  const p: PendingRemoval = { vs, rs, since: 1000 };
  t.is(removalDecision('TCP', conns(1, 0, 0), p, 2000, PERIOD), 'wait');
  t.is(removalDecision('TCP', conns(0, 0, 0), p, 2000, PERIOD), 'delete');
  t.is(removalDecision('TCP', conns(0, 0), undefined, 0, PERIOD), 'delete');
});

test('the graceful period bounds the wait; 0 means no wait', (t) => {
  const p: PendingRemoval = { vs, rs, since: 1000 };
  t.is(removalDecision('TCP', conns(3, 0, 0), p, 1000 + PERIOD - 1, PERIOD), 'wait');
  t.is(removalDecision('TCP', conns(3, 0, 0), p, 1000 + PERIOD, PERIOD), 'delete');
  t.is(removalDecision('TCP', conns(3, 0), undefined, 0, 0), 'delete');
});

function dest(weight: number, active: number, inactive: number): DestEntry {
  return { ...rs, weight, forwarding: 'masq', upperThreshold: 0, lowerThreshold: 0, activeConns: active, inactiveConns: inactive, persistConns: 0 };
}

test('periodic check: drained ones are deleted, busy ones kept, vanished ones forgotten', (t) => {
  const other = { protocol: 'TCP' as const, address: '10.96.0.11', port: 80 };
  const gone = { protocol: 'TCP' as const, address: '10.96.0.12', port: 80 };
  const pending = new Map<string, PendingRemoval>([
    [pendingKey(vs, rs), { vs, rs, since: 0 }],
    [pendingKey(other, rs), { vs: other, rs, since: 0 }],
    [pendingKey(gone, rs), { vs: gone, rs, since: 0 }],
  ]);
  const dests = new Map([
    ['TCP/10.96.0.10:80', [dest(0, 0, 0)]],
    ['TCP/10.96.0.11:80', [dest(0, 2, 1)]],
  ]);
  const r = checkPending(pending, dests, 5000, PERIOD);
  t.deepEqual(r.deletes, [{ vs, rs, since: 0 }]);
  t.deepEqual([...r.pending.keys()], ['TCP/10.96.0.11:80 -> 10.244.1.3:8080']);
  // Later, past the period: the busy one goes too.
  const later = checkPending(r.pending, dests, PERIOD, PERIOD);
  t.deepEqual(later.deletes.map((p) => pendingKey(p.vs, p.rs)), ['TCP/10.96.0.11:80 -> 10.244.1.3:8080']);
  t.is(later.pending.size, 0);
});
