/**
 * render and chains name the Pod of every endpoint derived from one: the
 * render header, the iptables chains view (with --source) and the IPVS
 * real-server table. Endpoints from EndpointSlices are shown as before.
 */
import test from 'ava';
import { serviceSummary } from '../../src/cli/render.ts';
import { endpointPods } from '../../src/model/pods.ts';
import { formatChains, withPods, type ServicePortChains } from '../../src/modes/shared/kube-chains/chains.ts';
import { desiredIpvsState } from '../../src/modes/ipvs/assemble.ts';
import { formatIpvsChains, ipvsServicePortViews } from '../../src/modes/ipvs/chains.ts';
import { readIpvsLive } from '../../src/modes/ipvs/live.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { FileSource } from '../../src/sources/file.ts';
import { silentLogger } from '../../src/util/log.ts';
import { World } from '../support/ipvs-world.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

/** default/shop:http from Pods (one not ready), default/web:http from an EndpointSlice. */
const state = (): Snapshot =>
  snap(
    sp('default/shop:http', '10.96.0.90', 80, [
      ep('10.244.3.2:8080', { nodeName: 'node-1', pod: 'default/shop-1' }),
      ep('10.244.3.3:8080', { ready: false, serving: false, nodeName: 'node-1', pod: 'default/shop-2' }),
      ep('10.244.3.4:8081', { ready: false, serving: true, terminating: true, pod: 'default/shop-canary' }),
    ]),
    sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')]),
  );

test('render: the header names the Pod and conditions of each derived endpoint, and nothing more for the others', (t) => {
  t.deepEqual(serviceSummary(state()), [
    'default/shop:http: ClusterIP 10.96.0.90:80/TCP (from the manifest), 1 ready of 3 endpoints',
    '  10.244.3.2:8080 from Pod default/shop-1 (ready)',
    '  10.244.3.3:8080 from Pod default/shop-2 (not ready)',
    '  10.244.3.4:8081 from Pod default/shop-canary (serving, terminating)',
    'default/web:http: ClusterIP 10.96.0.10:80/TCP (from the manifest), 1 ready of 1 endpoints',
  ]);
});

test('render of examples/pods: the Pods of Service shop', async (t) => {
  const { snapshot } = await new FileSource('examples/pods', { serviceCIDR: '10.96.0.0/12', logger: silentLogger() }).load();
  t.deepEqual(serviceSummary(snapshot), [
    'default/shop:http: ClusterIP 10.96.0.90:80/TCP (from the manifest), 3 ready of 3 endpoints',
    '  10.244.3.2:8080 from Pod default/shop-1 (ready)',
    '  10.244.3.3:8080 from Pod default/shop-2 (ready)',
    '  10.244.3.4:8081 from Pod default/shop-canary (ready)',
  ]);
});

test('chains with --source: each KUBE-SEP chain of a derived endpoint names its Pod, in the text and the JSON', (t) => {
  const live: ServicePortChains[] = [
    {
      servicePort: 'default/shop:http',
      chains: [
        { table: 'nat', chain: 'KUBE-SVC-AAAA', endpoint: null, rules: ['-A KUBE-SVC-AAAA -j KUBE-SEP-BBBB'] },
        { table: 'nat', chain: 'KUBE-SEP-BBBB', endpoint: '10.244.3.2:8080', rules: ['-A KUBE-SEP-BBBB -p tcp -j DNAT --to-destination 10.244.3.2:8080'] },
        { table: 'nat', chain: 'KUBE-SEP-CCCC', endpoint: '10.244.9.9:8080', rules: ['-A KUBE-SEP-CCCC -p tcp -j DNAT --to-destination 10.244.9.9:8080'] },
      ],
    },
    {
      servicePort: 'default/web:http',
      chains: [{ table: 'nat', chain: 'KUBE-SEP-DDDD', endpoint: '10.244.1.2:8080', rules: ['-A KUBE-SEP-DDDD -p tcp -j DNAT --to-destination 10.244.1.2:8080'] }],
    },
  ];
  const named = withPods(live, endpointPods(state()));
  t.is(
    formatChains(named),
    `# default/shop:http (nat KUBE-SVC-AAAA)
-A KUBE-SVC-AAAA -j KUBE-SEP-BBBB
# default/shop:http -> 10.244.3.2:8080 (nat KUBE-SEP-BBBB), Pod default/shop-1
-A KUBE-SEP-BBBB -p tcp -j DNAT --to-destination 10.244.3.2:8080
# default/shop:http -> 10.244.9.9:8080 (nat KUBE-SEP-CCCC)
-A KUBE-SEP-CCCC -p tcp -j DNAT --to-destination 10.244.9.9:8080

# default/web:http -> 10.244.1.2:8080 (nat KUBE-SEP-DDDD)
-A KUBE-SEP-DDDD -p tcp -j DNAT --to-destination 10.244.1.2:8080
`,
  );
  t.is(named[0]!.chains[1]!.pod, 'default/shop-1');
  t.false('pod' in named[0]!.chains[2]!);
  t.deepEqual(named[1], live[1], 'a service port without Pods is unchanged');
  t.is(formatChains(live), formatChains(withPods(live, new Map())), 'without --source, as before');
});

test('chains --mode ipvs with --source: a pod column for a virtual server whose real servers come from Pods only', async (t) => {
  const w = new World();
  await w.backend().sync(state(), { full: true, changed: new Set() });
  const live = await readIpvsLive(w, { tables: false });
  const text = formatIpvsChains(ipvsServicePortViews(live, desiredIpvsState(state(), { scheduler: 'rr' }).virtualServers, endpointPods(state())), true);
  t.is(
    text,
    `# default/shop:http (virtual server TCP 10.96.0.90:80)
TCP 10.96.0.90:80 rr (flags: hashed)
  kube-ipvs0: 10.96.0.90/32 bound
  KUBE-CLUSTER-IP: 10.96.0.90,tcp:80
  -> real server      forward  weight  active  inactive  KUBE-LOOP-BACK                  pod
  -> 10.244.3.2:8080  Masq     1       0       0         10.244.3.2,tcp:8080,10.244.3.2  default/shop-1

# default/web:http (virtual server TCP 10.96.0.10:80)
TCP 10.96.0.10:80 rr (flags: hashed)
  kube-ipvs0: 10.96.0.10/32 bound
  KUBE-CLUSTER-IP: 10.96.0.10,tcp:80
  -> real server      forward  weight  active  inactive  KUBE-LOOP-BACK
  -> 10.244.1.2:8080  Masq     1       0       0         10.244.1.2,tcp:8080,10.244.1.2
`,
  );
});
