/**
 * Capture the table the real kube-proxy writes in nftables mode, for the
 * takeover tests (test/fixtures/kube-proxy-nftables/): the real API server
 * and kube-proxy of the peers build (scripts/peers/build.sh), a testbed
 * node namespace, and the Services of services.yaml there (their
 * ClusterIPs and NodePorts given, so that the capture is the same every
 * time); once kube-proxy has programmed every one of them, `nft list table
 * ip kube-proxy` is written to table.nft. Everything it starts is removed
 * at the end, also on failure.
 *
 *   npx tsx scripts/peers/capture-kube-proxy-nftables.ts
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { run } from '../../src/kernel/exec.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import { TestApiServer, type Obj } from '../../test/cluster/support/apiserver.ts';
import { createNamespace, createNode } from '../../test/cluster/support/objects.ts';
import { locatePeers } from '../../test/cluster/support/peers.ts';
import { serveApiSocket, startForwarder } from './bench/api-bridge.ts';
import { kubeProxyConfig } from './bench/kube-proxy-config.ts';
import { ProxyProcess } from './bench/processes.ts';

const DIR = fileURLToPath(new URL('../../test/fixtures/kube-proxy-nftables/', import.meta.url));
const NODE = 'node-a';

const peers = locatePeers();
if (!peers) throw new Error('the real peers are not built: run scripts/peers/build.sh');
const docs = parseAllDocuments(await readFile(join(DIR, 'services.yaml'), 'utf8')).map((d) => d.toJSON() as Obj & { kind: string });
const work = await mkdtemp(join(tmpdir(), 'drover-kp-capture-'));
let api: TestApiServer | undefined;
let topo: Topology | undefined;
let proxy: ProxyProcess | undefined;
const bridge: { close(): void }[] = [];
try {
  api = await TestApiServer.start(peers.testApiserver, { serviceClusterIPRange: '172.30.0.0/16' });
  const socket = join(work, 'api.sock');
  bridge.push(await serveApiSocket(socket, api.state.securePort));
  topo = await createTopology({ backends: [{ name: 'b1', ip: '10.180.0.1', ports: [8080] }], serviceCidr: '172.30.0.0/16' });
  await createNamespace(api, 'nsd');
  await createNode(api, NODE, 'zone-a', topo.nodeIp);
  for (const o of docs) {
    const ns = o.metadata!.namespace!;
    const path = o.kind === 'Service' ? `/api/v1/namespaces/${ns}/services` : `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
    await api.must('POST', path, o);
  }
  const forwarder = await startForwarder(topo.node, api.state.securePort, socket);
  forwarder.unref();
  const config = join(work, 'kube-proxy.json');
  await writeFile(config, kubeProxyConfig({ mode: 'nftables', node: NODE, kubeconfig: api.state.kubeconfig, clusterCIDR: '10.180.0.0/16' }));
  proxy = await ProxyProcess.start(topo.node, [peers.kubeProxy, '--config', config], join(work, 'kube-proxy.log'));
  const services = docs.filter((o) => o.kind === 'Service').length;
  let table = '';
  for (let i = 0; ; i++) {
    if (i > 600) throw new Error(`kube-proxy did not program the ${services} Services within 60 s; its log:\n${proxy.logTail}`);
    table = (await run('/usr/sbin/nft', ['list', 'table', 'ip', 'kube-proxy'], { netns: topo.node, allowFail: true })).stdout ?? '';
    if ((table.match(/^\tchain service-/gm)?.length ?? 0) >= services - 1) break;
    await sleep(100);
  }
  // One more sync period, so that the capture is of a settled table.
  await sleep(2000);
  table = (await run('/usr/sbin/nft', ['list', 'table', 'ip', 'kube-proxy'], { netns: topo.node })).stdout;
  await writeFile(join(DIR, 'table.nft'), table);
  process.stdout.write(`wrote ${join(DIR, 'table.nft')} (${table.split('\n').length} lines), node IP ${topo.nodeIp}\n`);
} finally {
  await proxy?.stop();
  await topo?.destroy();
  for (const b of bridge) b.close();
  await api?.destroy();
  await rm(work, { recursive: true, force: true });
}
