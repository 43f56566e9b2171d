/**
 * nftables mode's frontends shared by two service ports (a NodePort equal
 * across Services, an external IP that is another Service's ClusterIP),
 * settled by the model's index (model/frontend-index.ts) as in every mode:
 * the service port first by name keeps the frontend, the other is served
 * without it, and a partial sync settles as a full sync does.
 */
import test from 'ava';
import { NftablesBackend, planFullSync } from '../../src/modes/nftables/backend.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import { ipv4Frontends, type ServicePort } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const RENDER = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };
const NODE_IPS = ['192.168.1.1'];
const FULL = { full: true, changed: new Set<string>() };

function backendOf(fake: FakeNft): NftablesBackend {
  return new NftablesBackend({ nft: fake, elements: fake.writer(), render: RENDER, frontends: { nodePortIPs: NODE_IPS }, logger: silentLogger() });
}

/** A NodePort service port on `nodePort` with one endpoint. */
function nodePortSP(key: string, clusterIP: string, nodePort: number, endpoint: string): ServicePort {
  return sp(key, clusterIP, 80, [ep(endpoint)], { type: 'NodePort', frontends: { ...ipv4Frontends(clusterIP), nodePort } });
}

async function serviceIPs(fake: FakeNft): Promise<string[]> {
  return [...((await fake.list()).sets.get('service-ips')?.elements.keys() ?? [])].sort();
}

test('two service ports added in one partial sync with the same NodePort: removing the one left out keeps the other', async (t) => {
  const fake = new FakeNft();
  const b = backendOf(fake);
  await b.sync(snap(), FULL);
  const a = nodePortSP('default/a:http', '10.96.0.10', 30080, '10.244.1.2:8080');
  const c = nodePortSP('default/c:http', '10.96.0.12', 30080, '10.244.1.3:8080');
  await b.sync(snap(a, c), { full: false, changed: new Set([a.key, c.key]) });
  const both = await serviceIPs(fake);
  t.true(both.includes('192.168.1.1 . tcp . 30080'));
  // Whichever one got the NodePort, a full sync agrees and writes nothing.
  const plan = planFullSync(TableModel.fromLive(await fake.list()), snap(a, c), RENDER, { nodePortIPs: NODE_IPS }, false);
  t.deepEqual(plan.ops, []);
  // default/a wins by key: removing default/c must leave the NodePort to default/a.
  await b.sync(snap(a), { full: false, changed: new Set([c.key]) });
  t.deepEqual(await serviceIPs(fake), ['10.96.0.10 . tcp . 80', '192.168.1.1 . tcp . 30080']);
  const slots = (await fake.list()).sets.get('endpoints')!.elements;
  t.is(slots.get('192.168.1.1 . tcp . 30080 . 0'), '10.244.1.2 . 8080');
});

test('a service port added later with a NodePort already served takes it when it comes first by name, as the next full sync does', async (t) => {
  const fake = new FakeNft();
  const b = backendOf(fake);
  const c = nodePortSP('default/c:http', '10.96.0.12', 30080, '10.244.1.3:8080');
  await b.sync(snap(c), FULL);
  const slot = async () => (await fake.list()).sets.get('endpoints')!.elements.get('192.168.1.1 . tcp . 30080 . 0');
  t.is(await slot(), '10.244.1.3 . 8080');
  const a = nodePortSP('default/a:http', '10.96.0.10', 30080, '10.244.1.2:8080');
  await b.sync(snap(a, c), { full: false, changed: new Set([a.key]) });
  t.is(await slot(), '10.244.1.2 . 8080');
  // The periodic resync agrees: default/a keeps the NodePort, default/c its ClusterIP.
  await b.sync(snap(a, c), FULL);
  t.is(await slot(), '10.244.1.2 . 8080');
  t.deepEqual(await serviceIPs(fake), ['10.96.0.10 . tcp . 80', '10.96.0.12 . tcp . 80', '192.168.1.1 . tcp . 30080']);
});

test('render names the service port refused, the frontend and the service port that keeps it', async (t) => {
  const { modeDriver } = await import('../../src/modes/registry.ts');
  const a = nodePortSP('default/a:http', '10.96.0.10', 30080, '10.244.1.2:8080');
  const c = nodePortSP('default/c:http', '10.96.0.12', 30080, '10.244.1.3:8080');
  const d = sp('default/d:http', '10.96.0.13', 80, [ep('10.244.1.4:8080')], { frontends: { ...ipv4Frontends('10.96.0.13'), externalIPs: [{ family: 'IPv4', ip: '10.96.0.10' }] } });
  const out = await modeDriver('nftables').render(snap(a, c, d), { render: { source: 't', masqueradeAll: false, serviceCidr: '10.96.0.0/12' }, modes: {} }, []);
  t.deepEqual(out.leftOut, [
    'service port default/c:http: NodePort *:30080/TCP belongs to service port default/a:http; not served there',
    'service port default/d:http: external IP 10.96.0.10:80/TCP belongs to service port default/a:http; not served there',
  ]);
  // The service ports refused a frontend are served without it.
  t.true(out.text.includes('10.96.0.12 . tcp . 80'));
  t.true(out.text.includes('10.96.0.13 . tcp . 80'));
  t.true(out.text.includes('10.96.0.10 . tcp . 80'));
});
