/**
 * Stale UDP conntrack entries are deleted after a sync that removes their
 * endpoint, as kube-proxy does: otherwise a UDP flow that keeps its source
 * port follows its conntrack entry to the removed endpoint forever.
 */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables } from '../../src/modes/iptables/exec.ts';
import { SystemConntrack } from '../../src/conntrack/exec.ts';
import { ipv4Frontends, type Snapshot } from '../../src/model/types.ts';
import { Proxier } from '../../src/proxier/proxier.ts';
import { createTopology, testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const unavailable = await testbedUnavailableReason();
const dns = (ips: string[]) =>
  sp('kube-system/dns:dns', '10.96.0.53', 53, ips.map((ip) => ep(`${ip}:53`)), { protocol: 'UDP', type: 'NodePort', frontends: ipv4Frontends('10.96.0.53', 30053) });
/** Where the client sends: the ClusterIP, and the NodePort on the node's address (192.168.100.1, the topology's default). */
const FRONTENDS = [
  { what: 'the ClusterIP', host: '10.96.0.53', port: 53 },
  { what: 'a NodePort', host: '192.168.100.1', port: 30053 },
];

if (unavailable) {
  test.skip(`conntrack tests skipped: ${unavailable}`, () => {});
} else {
  for (const fe of FRONTENDS) test(`a UDP flow to a removed endpoint loses its conntrack entry; flows to kept endpoints keep theirs: ${fe.what}`, async (t) => {
    const topo = await createTopology({
      backends: [
        { name: 'd1', ip: '10.244.1.2', ports: [8080] },
        { name: 'd2', ip: '10.244.1.3', ports: [8080] },
      ],
    });
    try {
      let current: Snapshot = snap(dns(['10.244.1.2', '10.244.1.3']));
      const proxier = new Proxier({
        source: { load: async () => ({ snapshot: current }), watch: () => undefined, close: () => undefined },
        backend: new IptablesBackend({
          exec: new SystemIptables({ variant: 'nft', netns: topo.node }),
          render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false },
          logger: silentLogger(),
        }),
        logger: silentLogger(),
        minSyncPeriodMs: 0,
        syncPeriodMs: 60_000,
        conntrack: new SystemConntrack(topo.node),
      });
      await proxier.syncOnce();
      // UDP datagrams from 20 fixed source ports: each flow gets a conntrack entry NATed to one endpoint.
      const send = `const d=require('dgram');let n=0;for(let p=40000;p<40020;p++){const s=d.createSocket('udp4');s.bind(p,()=>s.send('q',${fe.port},'${fe.host}',()=>{s.close();if(++n===20)process.exit(0)}))}`;
      await topo.exec(topo.client().netns, process.execPath, ['-e', send]);
      const flows = async () =>
        (await topo.exec(topo.node, 'conntrack', ['-L', '-p', 'udp', '--orig-dst', fe.host, '--orig-port-dst', String(fe.port)], { allowFail: true })).stdout
          .split('\n')
          .flatMap((l) => {
            const m = new RegExp(`sport=(\\d+) dport=${fe.port} (?:\\[UNREPLIED\\] )?src=(\\S+)`).exec(l);
            return m ? [`${m[1]} ${m[2]}`] : [];
          })
          .sort();
      const before = await flows();
      t.is(before.length, 20);
      const toD2 = before.filter((f) => f.endsWith('10.244.1.3'));
      t.true(toD2.length > 0 && toD2.length < 20, `${toD2.length} of 20 flows went to d2`);

      current = snap(dns(['10.244.1.2']));
      await proxier.syncOnce();
      t.deepEqual(await flows(), before.filter((f) => f.endsWith('10.244.1.2')));
    } finally {
      await topo.destroy();
    }
  });
}
