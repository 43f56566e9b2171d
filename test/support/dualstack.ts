/**
 * The dual-stack world of the kernel tests of every mode
 * (test/kernel/dualstack.test.ts, test/kernel/nft-dualstack.test.ts): the
 * Services of test/fixtures/dualstack/services.yaml, three backends with
 * an address of each family, one client outside the cluster with both,
 * and each family's `--cluster-cidr`.
 */
import type { Snapshot } from '../../src/model/types.ts';
import { createTopology, type Topology } from '../../src/testbed/topology.ts';
import { buildFrom } from '../unit/model-helpers.ts';

/** The pod network of each family, as `--cluster-cidr 10.244.0.0/16,fd00:244::/48` gives it. */
export const CLUSTER_CIDRS = { IPv4: '10.244.0.0/16', IPv6: 'fd00:244::/48' } as const;

const BACKENDS = [
  { name: 'b1', ip: '10.244.1.2', ip6: 'fd00:244:1::2', ports: [8080] },
  { name: 'b2', ip: '10.244.1.3', ip6: 'fd00:244:1::3', ports: [8080] },
  { name: 'b3', ip: '10.244.1.4', ip6: 'fd00:244:1::4', ports: [8080] },
];

/** The dual-stack fixture's snapshot and the namespaces (client `outside`: 192.168.100.2 and fd00:100::2). Destroy the topology when done. */
export async function dualStackWorld(): Promise<{ snapshot: Snapshot; topo: Topology }> {
  const snapshot = (await buildFrom(['test/fixtures/dualstack/services.yaml'])).snapshot;
  const topo = await createTopology({ backends: BACKENDS, clients: [{ name: 'outside', ip: '192.168.100.2', ip6: 'fd00:100::2' }] });
  return { snapshot, topo };
}
