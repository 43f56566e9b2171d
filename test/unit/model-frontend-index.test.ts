/**
 * The frontends of a service port expanded once (model/frontend-index.ts
 * frontendEntries) and the index that keeps one owner per
 * address·protocol·port, updated per changed service port.
 */
import test from 'ava';
import { EVERY_NODE_PORT_ADDRESS, FrontendIndex, frontendEntries, refusalText, settleView } from '../../src/model/frontend-index.ts';
import { ipv4Frontends, type Frontends, type ServicePort, type Snapshot } from '../../src/model/types.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const NODE = { name: 'n1', addresses: [{ type: 'InternalIP' as const, address: '192.168.1.1' }] };

function withFrontends(key: string, clusterIP: string, extra: Partial<Frontends>, port = 80): ServicePort {
  return sp(key, clusterIP, port, [ep('10.244.1.2:8080')], { type: 'LoadBalancer', frontends: { ...ipv4Frontends(clusterIP), ...extra } });
}

test('one service port expands in kube-proxy order, each family its own, the NodePort on every NodePort address', (t) => {
  const port = withFrontends('ns/web:http', '10.96.0.10', {
    nodePort: 30080,
    externalIPs: [
      { family: 'IPv6', ip: 'fd00::7' },
      { family: 'IPv4', ip: '192.0.2.7' },
    ],
    loadBalancerIngress: [
      { family: 'IPv4', ip: '203.0.113.1', ipMode: 'VIP' },
      { family: 'IPv4', ip: '203.0.113.2', ipMode: 'Proxy' },
    ],
    loadBalancerSourceRanges: ['192.168.0.0/16', '2001:db8::/32'],
  });
  const entries = frontendEntries({ ...port, sessionAffinity: { timeoutSeconds: 60 }, externalTrafficPolicy: 'Local' }, 'IPv4', NODE);
  t.deepEqual(
    entries.map((e) => `${e.kind} ${e.key} ${e.policy} ${e.affinitySeconds} ${e.sourceRanges.map((r) => r.text).join(',')} ${e.allowFromNode}`),
    [
      'ClusterIP 10.96.0.10:80/TCP Cluster 60  false',
      'ExternalIP 192.0.2.7:80/TCP Local 60  false',
      'LoadBalancer 203.0.113.1:80/TCP Local 60 192.168.0.0/16 true',
      'NodePort *:30080/TCP Local 60  false',
    ],
  );
  t.is(entries[3]!.address, EVERY_NODE_PORT_ADDRESS);
  const v6 = frontendEntries({ ...port, clusterIP: 'fd00:96::10' }, 'IPv6');
  t.deepEqual(
    v6.map((e) => e.key),
    ['[fd00:96::10]:80/TCP', '[fd00::7]:80/TCP', '*:30080/TCP'],
  );
});

test('a clash is settled as the model settles it: ClusterIP first, then by name; the loser is served without the frontend', (t) => {
  const a = withFrontends('default/a:http', '10.96.0.10', { nodePort: 30080, externalIPs: [{ family: 'IPv4', ip: '192.0.2.7' }] });
  const b = withFrontends('default/b:http', '10.96.0.11', { nodePort: 30080, externalIPs: [{ family: 'IPv4', ip: '10.96.0.12' }] });
  const c = withFrontends('default/c:http', '10.96.0.12', { externalIPs: [{ family: 'IPv4', ip: '192.0.2.7' }] });
  const d = withFrontends('default/d:http', '10.96.0.12', {});
  const { view, refusals } = settleView(snap(d, c, b, a), 'IPv4');
  t.deepEqual(
    refusals.map((r) => refusalText(r, 'IPv4')),
    [
      'service port default/b:http: external IP 10.96.0.12:80/TCP belongs to service port default/c:http; not served there',
      'service port default/b:http: NodePort *:30080/TCP belongs to service port default/a:http; not served there',
      'service port default/c:http: external IP 192.0.2.7:80/TCP belongs to service port default/a:http; not served there',
      'service port default/d:http: ClusterIP 10.96.0.12:80/TCP belongs to service port default/c:http; service port left out',
    ],
  );
  t.deepEqual([...view.services.keys()], ['default/a:http', 'default/b:http', 'default/c:http']);
  t.is(view.services.size, 3);
  t.is(view.services.get('default/a:http'), a, 'the winner is served as it is');
  t.is(view.services.get('default/b:http')!.frontends.nodePort, undefined);
  t.deepEqual(view.services.get('default/b:http')!.frontends.externalIPs, []);
  t.deepEqual(view.services.get('default/c:http')!.frontends.externalIPs, []);
  t.is(view.services.get('default/d:http'), undefined);
});

test('an external IP that is also the same service port\'s LoadBalancer IP is one frontend, no clash; one without clash costs nothing', (t) => {
  const a = withFrontends('default/a:http', '10.96.0.10', {
    externalIPs: [{ family: 'IPv4', ip: '192.0.2.7' }],
    loadBalancerIngress: [{ family: 'IPv4', ip: '192.0.2.7', ipMode: 'VIP' }],
  });
  const s = snap(a);
  const { view, refusals } = settleView(s, 'IPv4');
  t.deepEqual(refusals, []);
  t.is(view, s);
});

test('updates per changed service port: a newcomer that loses changes only itself; when the owner goes the other takes over', (t) => {
  const a = withFrontends('default/a:http', '10.96.0.10', { nodePort: 30080 });
  const b = withFrontends('default/b:http', '10.96.0.11', { nodePort: 30080 });
  const other = withFrontends('default/z:http', '10.96.0.30', { nodePort: 30090 });
  const index = FrontendIndex.of(snap(a, other), 'IPv4');
  t.deepEqual(index.refusals(), []);

  const added: Snapshot = snap(a, b, other);
  const d1 = index.update(added, ['default/b:http']);
  t.deepEqual([...d1.changed], ['default/b:http']);
  t.deepEqual(d1.refusals.map((r) => `${r.servicePort} ${r.entry.key} ${r.owner}`), ['default/b:http *:30080/TCP default/a:http']);
  t.is(index.served('default/b:http')!.frontends.nodePort, undefined);
  t.deepEqual(index.entries('default/b:http').map((e) => e.kind), ['ClusterIP']);

  // The same refusal again is not new.
  t.deepEqual(index.update(added, ['default/b:http']).refusals, []);

  const gone: Snapshot = snap(b, other);
  const d2 = index.update(gone, ['default/a:http']);
  t.deepEqual([...d2.changed].sort(), ['default/a:http', 'default/b:http'], 'the loser gains its NodePort');
  t.deepEqual(d2.refusals, []);
  t.is(index.served('default/b:http'), b);
  t.is(index.view(gone), gone);

  // An earlier name coming back takes the NodePort from b again: ownership never depends on what was served.
  const back = index.update(added, ['default/a:http']);
  t.deepEqual([...back.changed].sort(), ['default/a:http', 'default/b:http']);
  t.deepEqual(FrontendIndex.of(added, 'IPv4').refusals(), index.refusals());
});

test('a service port left out whole releases its other frontends to the next claimant', (t) => {
  const a = withFrontends('default/a:http', '10.96.0.10', {});
  const b = withFrontends('default/b:http', '10.96.0.10', { nodePort: 30080 });
  const c = withFrontends('default/c:http', '10.96.0.12', { nodePort: 30080 });
  const index = FrontendIndex.of(snap(b, c), 'IPv4');
  t.is(index.served('default/c:http')!.frontends.nodePort, undefined, 'b keeps the NodePort');
  const d = index.update(snap(a, b, c), ['default/a:http']);
  t.deepEqual([...d.changed].sort(), ['default/a:http', 'default/b:http', 'default/c:http']);
  t.is(index.served('default/b:http'), undefined);
  t.is(index.served('default/c:http'), c, 'c gets the NodePort b no longer holds');
  t.deepEqual(index.refusals().map((r) => r.servicePort), ['default/b:http']);
});
