/**
 * IPv6 and dual-stack in IPVS mode, with real packets between network
 * namespaces of the guest: the dual-stack backend (both families) runs in
 * the node namespace; a client outside the cluster connects over IPv6 to an
 * IPv6 ClusterIP and to a NodePort on the node's IPv6 address, and to both
 * ClusterIPs of a dual-stack Service. The kernel is read back: virtual and
 * real servers over netlink, the KUBE-6- ipsets, kube-ipvs0's /128
 * addresses and the ip6tables rules; a restart writes nothing; cleanup
 * removes both families.
 */
import test from 'ava';
import { probe } from '../../src/testbed/probe.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import type { ServicePort } from '../../src/model/types.ts';
import { ep, sp } from '../support/snapshots.ts';
import { Driver } from './support/driver-client.ts';
import { createIpvsTopology, PROBE_TIMEOUT_MS, registerIpvsTests } from './support/env.ts';

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ip6: 'fd00:244:1::2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ip6: 'fd00:244:1::3', ports: [8080] },
];
const CLUSTER_CIDR6 = 'fd00:244::/48';

/** A NodePort service port `default/web:http` of either family, on port 30080. */
const web = (clusterIP: string, endpoints: string[]): ServicePort => {
  const base = sp('default/web:http', clusterIP, 80, endpoints.map((e) => ep(e)));
  return { ...base, type: 'NodePort', frontends: { ...base.frontends, nodePort: 30080 } };
};
const web4 = web('10.96.0.10', ['10.244.1.2:8080', '10.244.1.3:8080']);
const web6 = web('fd00:96::10', ['[fd00:244:1::2]:8080', '[fd00:244:1::3]:8080']);
/** An IPv6-only Service with one endpoint. */
const only6 = sp('default/only6:http', 'fd00:96::20', 80, [ep('[fd00:244:1::2]:8080')]);

let topo: Topology;
let driver: Driver;

type Dump = { services: { service: { protocol: string; address: string; port: number; netmask: number }; dests: { address: string; port: number; weight: number; forwarding: string }[] }[] };

/** The IPv6 virtual servers, with their real servers, as read over netlink: "TCP [addr]:port -> [addr]:port w1 masq". */
async function ipv6Servers(d: Driver): Promise<string[]> {
  const dump = await d.request<Dump>('dump');
  return dump.services
    .filter((s) => s.service.address.includes(':'))
    .flatMap((s) => [`${s.service.protocol} [${s.service.address}]:${s.service.port} netmask ${s.service.netmask}`, ...s.dests.map((r) => `  -> [${r.address}]:${r.port} w${r.weight} ${r.forwarding}`)])
    .sort();
}

/** Entries of one set as `ipset save` lists them in the node namespace, sorted; undefined when it does not exist. */
async function setEntries(name: string): Promise<{ create: string; entries: string[] } | undefined> {
  const save = (await topo.exec(topo.node, 'ipset', ['save'])).stdout.split('\n');
  const create = save.find((l) => l.startsWith(`create ${name} `));
  if (!create) return undefined;
  return { create, entries: save.filter((l) => l.startsWith(`add ${name} `)).map((l) => l.slice(`add ${name} `.length)).sort() };
}

if (await registerIpvsTests('IPVS IPv6 and dual-stack tests')) {
  test.before(async () => {
    topo = await createIpvsTopology(BACKENDS, { ipv6: true });
    driver = await Driver.start(topo.node);
    await driver.open({ dualStack: { clusterCIDR6: CLUSTER_CIDR6 }, readNodeAddresses: true });
    await driver.sync([web4], { full: true }, undefined, [web6, only6]);
  });

  test.after.always(async () => {
    await driver?.stop();
    await topo?.destroy();
  });

  test.serial('the kernel holds the IPv6 virtual and real servers, KUBE-6- sets of family inet6, /128 addresses on kube-ipvs0 and the ip6tables rules', async (t) => {
    const node6 = topo.ipv6.nodeIp;
    const gw6 = topo.ipv6.gateway;
    const servers = await ipv6Servers(driver);
    // ClusterIPs, and the NodePort on each of the node's global IPv6 addresses.
    for (const vs of ['[fd00:96::10]:80', `[${node6}]:30080`, `[${gw6}]:30080`]) {
      t.true(servers.includes(`TCP ${vs} netmask 128`), `${vs} in ${servers.join('; ')}`);
      t.true(servers.includes(`  -> [fd00:244:1::2]:8080 w1 masq`) && servers.includes(`  -> [fd00:244:1::3]:8080 w1 masq`));
    }
    t.true(servers.includes('TCP [fd00:96::20]:80 netmask 128'));
    t.false(servers.some((s) => /\[(fe80:|::1\])/.test(s)), 'no NodePort on link-local or loopback addresses');
    const cluster6 = await setEntries('KUBE-6-CLUSTER-IP');
    t.regex(cluster6?.create ?? '', /^create KUBE-6-CLUSTER-IP hash:ip,port family inet6 /);
    t.deepEqual(cluster6?.entries, ['fd00:96::10,tcp:80', 'fd00:96::20,tcp:80']);
    t.deepEqual((await setEntries('KUBE-6-LOOP-BACK'))?.entries, ['fd00:244:1::2,tcp:8080,fd00:244:1::2', 'fd00:244:1::3,tcp:8080,fd00:244:1::3']);
    t.deepEqual((await setEntries('KUBE-6-NODE-PORT-TCP'))?.entries, ['30080']);
    t.deepEqual((await setEntries('KUBE-CLUSTER-IP'))?.entries, ['10.96.0.10,tcp:80'], 'the IPv4 set holds the IPv4 ClusterIP only');
    const addrs = (await topo.exec(topo.node, 'ip', ['-o', 'addr', 'show', 'dev', 'kube-ipvs0'])).stdout;
    t.deepEqual([...addrs.matchAll(/inet6? (\S+)/g)].map((m) => m[1]).sort(), ['10.96.0.10/32', 'fd00:96::10/128', 'fd00:96::20/128']);
    const rules6 = (await topo.exec(topo.node, 'ip6tables-save', ['-t', 'nat'])).stdout;
    t.regex(rules6, /-A KUBE-SERVICES ! -s fd00:244::\/48 -m comment --comment "Kubernetes service cluster ip \+ port for masquerade purpose" -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ/);
    // IPv6 forwarding is the node's to set (the testbed sets it in the node namespace, src/testbed/topology.ts), as with kube-proxy.
  });

  test.serial('IPv6 connections to an IPv6 ClusterIP reach the IPv6 backends, masqueraded from outside the cluster', async (t) => {
    const s = await probe(topo, { from: topo.client('outside').netns, host: 'fd00:96::10', port: 80, count: 20, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 10, b2: 10 });
    t.true(s.results.every((r) => r.ok && r.reply.ip.includes(':')));
    t.deepEqual([...new Set(Object.values(s.clientsSeen).flat())], [topo.ipv6.gateway]);
    const one = await probe(topo, { from: topo.client('outside').netns, host: 'fd00:96::20', port: 80, count: 4, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(one.counts, { b1: 4 });
  });

  test.serial('a NodePort on the node\'s IPv6 address reaches the IPv6 backends', async (t) => {
    const s = await probe(topo, { from: topo.client('outside').netns, host: topo.ipv6.nodeIp, port: 30080, count: 20, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(s.errors, {});
    t.deepEqual(s.counts, { b1: 10, b2: 10 });
  });

  test.serial('a dual-stack Service is reached on both families', async (t) => {
    const v4 = await probe(topo, { from: topo.client('outside').netns, host: '10.96.0.10', port: 80, count: 10, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(v4.errors, {});
    t.deepEqual(v4.counts, { b1: 5, b2: 5 });
    t.true(v4.results.every((r) => r.ok && !r.reply.ip.includes(':')));
    const v6 = await probe(topo, { from: topo.client('outside').netns, host: 'fd00:96::10', port: 80, count: 10, timeoutMs: PROBE_TIMEOUT_MS });
    t.deepEqual(v6.counts, { b1: 5, b2: 5 });
  });

  test.serial('a restart adopts both families: the first full sync of a new backend writes nothing', async (t) => {
    await driver.open({ dualStack: { clusterCIDR6: CLUSTER_CIDR6 }, readNodeAddresses: true });
    const { result } = await driver.sync([web4], { full: true }, undefined, [web6, only6]);
    const written = Object.values(result.written as Record<string, number>).reduce((a, b) => a + b, 0);
    const deleted = Object.values(result.deleted as Record<string, number>).reduce((a, b) => a + b, 0);
    t.is(written + deleted, 0, JSON.stringify(result));
  });

  test.serial('removing the IPv6-only Service removes its virtual server, set entry and address; cleanup then removes both families', async (t) => {
    await driver.sync([web4], { full: false, changed: ['default/only6:http'] }, undefined, [web6]);
    t.false((await ipv6Servers(driver)).some((s) => s.includes('fd00:96::20')));
    t.deepEqual((await setEntries('KUBE-6-CLUSTER-IP'))?.entries, ['fd00:96::10,tcp:80']);
    const { removed } = await driver.cleanup();
    t.is(removed.link, 1);
    t.deepEqual(await ipv6Servers(driver), []);
    t.is(await setEntries('KUBE-6-CLUSTER-IP'), undefined);
    t.is(await setEntries('KUBE-CLUSTER-IP'), undefined);
    t.false((await topo.exec(topo.node, 'ip6tables-save', ['-t', 'nat'])).stdout.includes('KUBE-6-'));
    const link = await topo.exec(topo.node, 'ip', ['link', 'show', 'kube-ipvs0'], { allowFail: true });
    t.not(link.code, 0);
  });
}
