/** Matching endpoints to a service port (src/model/endpoints.ts endpointsFor, indexEndpoints). */
import test from 'ava';
import { endpointsFor, indexEndpoints } from '../../src/model/endpoints.ts';
import type { EndpointAddress, EndpointGroup, ParsedServicePort } from '../../src/model/parsed.ts';

const http: ParsedServicePort = { index: 0, name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 };
const addr = (ip: string, ready: boolean, more: Partial<EndpointAddress> = {}): EndpointAddress => ({ ip, ready, serving: ready, terminating: false, ...more });

test('endpoints: de-duplicated by ip:port, the first of the best rank kept, sorted by address then port', (t) => {
  const groups: EndpointGroup[] = [
    {
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      addresses: [addr('10.0.0.10', true, { nodeName: 'a' }), addr('10.0.0.9', false, { nodeName: 'a' }), addr('10.0.0.2', true, { nodeName: 'a' })],
    },
    {
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      // 10.0.0.10 again, as good: the first stays; 10.0.0.9 again, better: it wins.
      addresses: [addr('10.0.0.10', true, { nodeName: 'b' }), addr('10.0.0.9', true, { nodeName: 'b' })],
    },
    {
      // Another target port for the same name: its own endpoints.
      ports: [{ name: 'http', port: 8081, protocol: 'TCP' }, { name: 'http', port: 8080, protocol: 'UDP' }],
      addresses: [addr('10.0.0.10', false, { nodeName: 'c' })],
    },
  ];
  const eps = endpointsFor(http, indexEndpoints(groups));
  t.deepEqual(eps, [
    { ip: '10.0.0.2', ready: true, serving: true, terminating: false, nodeName: 'a', port: 8080 },
    { ip: '10.0.0.9', ready: true, serving: true, terminating: false, nodeName: 'b', port: 8080 },
    { ip: '10.0.0.10', ready: true, serving: true, terminating: false, nodeName: 'a', port: 8080 },
    { ip: '10.0.0.10', ready: false, serving: false, terminating: false, nodeName: 'c', port: 8081 },
  ]);
  t.true(Object.isFrozen(eps));
  t.true(eps.every((e) => Object.isFrozen(e)));
  // The group's own addresses are copied, not shared.
  t.not(eps[0], groups[0]!.addresses[2] as unknown);
});

test('endpoints: none for a port no group serves, or groups without addresses', (t) => {
  t.deepEqual(endpointsFor(http, indexEndpoints([])), []);
  t.deepEqual(endpointsFor(http, indexEndpoints([{ ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], addresses: [] }])), []);
  t.deepEqual(endpointsFor(http, indexEndpoints([{ ports: [{ name: 'web', port: 8080, protocol: 'TCP' }], addresses: [addr('10.0.0.1', true)] }])), []);
});

test('endpoints: one endpoint port in address order is copied as it is; repeated or unordered ones are still sorted and de-duplicated', (t) => {
  const one = (addresses: EndpointAddress[]) => endpointsFor(http, indexEndpoints([{ ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], addresses }]));
  const ips = (eps: readonly { ip: string; ready: boolean }[]) => eps.map((e) => `${e.ip}${e.ready ? '' : '!r'}`);
  t.deepEqual(one([addr('10.0.0.2', true), addr('10.0.0.9', false), addr('10.0.0.10', true)]), [
    { ip: '10.0.0.2', ready: true, serving: true, terminating: false, port: 8080 },
    { ip: '10.0.0.9', ready: false, serving: false, terminating: false, port: 8080 },
    { ip: '10.0.0.10', ready: true, serving: true, terminating: false, port: 8080 },
  ]);
  t.deepEqual(ips(one([addr('10.0.0.2', false), addr('10.0.0.2', true), addr('10.0.0.3', true)])), ['10.0.0.2', '10.0.0.3']);
  t.deepEqual(ips(one([addr('10.0.0.10', true), addr('10.0.0.9', true)])), ['10.0.0.9', '10.0.0.10']);
  t.true(Object.isFrozen(one([addr('10.0.0.2', true)])));
});
