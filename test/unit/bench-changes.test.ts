/** The benchmark's synthetic state and the changes of one iteration. */
import test from 'ava';
import { changedServicePorts } from '../../src/proxier/changes.ts';
import { iterationChanges, type ClockService } from '../../src/bench/changes.ts';
import { guestReason } from '../../src/bench/environment.ts';
import { addedServicePort, benchSnapshot, clockServicePort, type RealEndpoint } from '../../src/bench/synth.ts';

const ep = (backend: string, ip: string, port: number): RealEndpoint => ({ backend, ip, port });
const clocks: ClockService[] = [0, 1].map((c) => {
  const keep = ep('b1', '10.244.1.2', 8080 + c);
  const toggle = ep('b2', '10.244.2.2', 8080 + c);
  return { port: clockServicePort(c, [keep, toggle]), keep, toggle };
});
const added = [ep('b1', '10.244.1.2', 8080), ep('b2', '10.244.2.2', 8080)];
const COUNTS = { removalConfirm: 10, failConfirm: 3 };

test('the starting state holds exactly the requested number of service ports, clock services included', (t) => {
  const base = benchSnapshot(50, 10, clocks.map((c) => c.port));
  t.is(base.services.size, 50);
  t.deepEqual(
    base.services.get('bench/clock-1:http')?.endpoints.map((e) => `${e.ip}:${e.port}`),
    ['10.244.1.2:8081', '10.244.2.2:8081'],
  );
  t.is(base.services.get('bench/clock-1:http')?.clusterIP, '10.110.0.11');
  t.is(base.services.get('bench/svc-47:http')?.endpoints.length, 10);
  t.false(base.services.has('bench/svc-48:http'));
  t.deepEqual([...base.services.keys()], [...base.services.keys()].sort());
  t.throws(() => benchSnapshot(1, 10, clocks.map((c) => c.port)), { message: /at least 2 services/ });
  t.is(addedServicePort(300, added).clusterIP, '10.111.1.54');
});

test('an iteration: one service port changes each time, the pairs put the state back, and each has its data-path check', (t) => {
  const base = benchSnapshot(20, 3, clocks.map((c) => c.port));
  const changes = iterationChanges(base, clocks, 3, added, COUNTS);
  t.deepEqual(
    changes.map((c) => c.kind),
    ['endpoint-removed', 'endpoint-added', 'service-added', 'service-removed'],
  );
  for (const c of changes) t.deepEqual([...changedServicePorts(c.from, c.to)], [c.key], c.kind);
  t.is(changes[0]!.key, 'bench/clock-1:http', 'iteration 3 uses clock service 3 mod 2');
  t.deepEqual(changes[0]!.after?.endpoints.map((e) => `${e.ip}:${e.port}`), ['10.244.1.2:8081']);
  t.is(changes[0]!.from, base);
  t.is(changes[1]!.to, base);
  t.is(changes[2]!.from, base);
  t.is(changes[3]!.to, base);
  t.is(changes[2]!.key, 'bench/added-3:http');
  t.is(changes[2]!.before, undefined);
  t.is(changes[3]!.after, undefined);
  t.deepEqual(
    changes.map((c) => c.check),
    [
      { until: 'avoids', host: '10.110.0.11', port: 80, endpoint: 'b2:8081', consecutive: 10 },
      { until: 'lands', host: '10.110.0.11', port: 80, endpoint: 'b2:8081' },
      { until: 'answers', host: '10.111.0.13', port: 80 },
      { until: 'fails', host: '10.111.0.13', port: 80, consecutive: 3 },
    ],
  );
});

test('a QEMU guest is recognised by DROVER_IN_GUEST, DMI or the CPU model; a host is not', (t) => {
  t.is(guestReason({ inGuestVar: '1' }), 'DROVER_IN_GUEST=1');
  t.is(guestReason({ dmi: 'QEMU Standard PC (Q35 + ICH9, 2009)' }), 'DMI says "QEMU Standard PC (Q35 + ICH9, 2009)"');
  t.is(guestReason({ cpuModel: 'QEMU TCG CPU version 2.5+' }), 'CPU model "QEMU TCG CPU version 2.5+"');
  t.is(guestReason({ inGuestVar: '0', dmi: 'Dell Inc. PowerEdge R640', cpuModel: 'AMD EPYC' }), undefined);
  t.is(guestReason({}), undefined);
});
