/**
 * One cluster test's world: a test API server, throw-away namespaces
 * (src/testbed: a node, backends b1… at 10.244.1.2… and fd00:244:1::2…
 * serving on 8080, one client `outside` at 192.168.100.2 and fd00:100::2),
 * deploy/'s RBAC applied with a kubeconfig holding a TokenRequest token of
 * drover's ServiceAccount, the namespace `shop`, and this node's Node
 * `node-a` (zone-a, InternalIP the node's client-side address).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { probe } from '../../../src/testbed/probe.ts';
import { createTopology, type Topology } from '../../../src/testbed/topology.ts';
import { until } from '../../support/wait.ts';
import { TestApiServer, type TestApiServerOptions } from './apiserver.ts';
import { createNamespace, createNode, createService, endpointSliceObject, writeEndpointSlice, type EndpointSpec, type ServiceSpec } from './objects.ts';
import type { Peers } from './peers.ts';
import { applyDeployRbac, serviceAccountToken, writeKubeconfig } from './rbac.ts';

/** The namespace of the tests' Services. */
export const NS = 'shop';
/** This node's name (`--hostname-override`). */
export const NODE = 'node-a';
/** drover's ServiceAccount (deploy/kubernetes/drover.yaml), as the API server names its user. */
export const DROVER_USER = 'system:serviceaccount:kube-system:drover';

/** See the module comment. */
export interface ClusterWorld {
  readonly api: TestApiServer;
  readonly topo: Topology;
  /** Scratch folder: kubeconfigs, status files, state folders. */
  readonly dir: string;
  /** A kubeconfig with a token of deploy/'s drover ServiceAccount. */
  readonly kubeconfig: string;
  /** Create a Service in {@link NS}; its uid is kept for its EndpointSlices. */
  service(name: string, spec: ServiceSpec): ReturnType<typeof createService>;
  /** The endpoint of backend `b` (IPv4, or IPv6 with `v6`) on this node, ready unless said. */
  ep(b: string, opts?: { v6?: boolean; ready?: boolean }): EndpointSpec;
  /** Create or replace EndpointSlice `name` of Service `svc`, as the EndpointSlice controller writes it. */
  slice(svc: string, name: string, endpoints: EndpointSpec[], addressType?: 'IPv4' | 'IPv6', headless?: boolean): Promise<unknown>;
  /** The backends that answered 20 new connections from the client to host:port, sorted, with failures as "!CODE". */
  reached(host: string, port: number): Promise<string>;
  /** Until {@link reached} is `want`. */
  eventually(what: string, host: string, port: number, want: string, timeoutMs?: number): Promise<void>;
  /** The flags of every drover command in this world: the Kubernetes source with `kubeconfig` (default: {@link kubeconfig}), this node, its namespace, the CIDRs, a state folder. */
  sourceFlags(kubeconfig?: string): string[];
  /** The flags `drover run` adds: quick syncs, a status file named after `name`, no metrics or health servers (their ports would clash). */
  runFlags(name: string): string[];
  /** Remove everything; never throws. */
  destroy(): Promise<void>;
}

/** Build a world with `backends` backends; on failure everything made so far is removed. */
export async function clusterWorld(peers: Peers, opts: TestApiServerOptions & { backends?: number } = {}): Promise<ClusterWorld> {
  const dir = await mkdtemp(join(tmpdir(), 'drover-cluster-'));
  let api: TestApiServer | undefined;
  let topo: Topology | undefined;
  const destroy = async () => {
    await topo?.destroy();
    await api?.destroy();
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  };
  try {
    api = await TestApiServer.start(peers.testApiserver, opts);
    topo = await createTopology({
      backends: Array.from({ length: opts.backends ?? 4 }, (_, i) => ({ name: `b${i + 1}`, ip: `10.244.1.${i + 2}`, ip6: `fd00:244:1::${i + 2}`, ports: [8080] })),
      clients: [{ name: 'outside', ip: '192.168.100.2', ip6: 'fd00:100::2' }],
    });
    await applyDeployRbac(api);
    const kubeconfig = await writeKubeconfig(api, await serviceAccountToken(api, 'kube-system', 'drover'), join(dir, 'drover.kubeconfig'));
    await createNamespace(api, NS);
    await createNode(api, NODE, 'zone-a', topo.nodeIp);
    return world(api, topo, dir, kubeconfig, destroy);
  } catch (err) {
    await destroy();
    throw err;
  }
}

/** {@link ClusterWorld.reached} on `topo`, a node with a client named `outside`. */
export async function reachedOn(topo: Topology, host: string, port: number): Promise<string> {
  const r = await probe(topo, { from: topo.client('outside').netns, host, port, count: 20, timeoutMs: 1000 });
  return [...Object.keys(r.counts), ...Object.keys(r.errors).map((e) => `!${e}`)].sort().join(',');
}

/** {@link ClusterWorld.eventually} on `topo`, as {@link reachedOn}. */
export function eventuallyOn(topo: Topology, what: string, host: string, port: number, want: string, timeoutMs = 60_000): Promise<void> {
  return until(`${what}: ${host}:${port} reaching ${want}`, async () => (await reachedOn(topo, host, port)) === want, timeoutMs, 250);
}

function world(api: TestApiServer, topo: Topology, dir: string, kubeconfig: string, destroy: () => Promise<void>): ClusterWorld {
  const uids = new Map<string, string>();
  const reached = (host: string, port: number): Promise<string> => reachedOn(topo, host, port);
  return {
    api,
    topo,
    dir,
    kubeconfig,
    service: async (name, spec) => {
      const s = await createService(api, NS, name, spec);
      uids.set(name, s.metadata.uid);
      return s;
    },
    ep: (b, opts = {}) => {
      const backend = topo.backend(b);
      return { ip: opts.v6 ? backend.ip6! : backend.ip, pod: `${b}-pod`, nodeName: NODE, zone: 'zone-a', ...(opts.ready === false ? { ready: false } : {}) };
    },
    slice: (svc, name, endpoints, addressType = 'IPv4', headless = false) => {
      const uid = uids.get(svc);
      if (uid === undefined) throw new Error(`slice ${name}: Service ${svc} was not created by this world`);
      return writeEndpointSlice(api, endpointSliceObject(NS, name, { name: svc, uid, headless }, addressType, endpoints));
    },
    reached,
    eventually: (what, host, port, want, timeoutMs) => eventuallyOn(topo, what, host, port, want, timeoutMs),
    sourceFlags: (config = kubeconfig) => [
      '--source', 'kubernetes', '--kubeconfig', config, '--hostname-override', NODE, '--netns', topo.node, '--iptables-backend', 'nft',
      '--cluster-cidr', '10.244.0.0/16,fd00:244::/48', '--service-cidr', '10.96.0.0/16', '--state-dir', join(dir, 'state'),
    ],
    runFlags: (name) => ['--min-sync-period', '200ms', '--status-file', join(dir, `${name}.status.json`), '--metrics-bind-address', '', '--healthz-bind-address', ''],
    destroy,
  };
}
