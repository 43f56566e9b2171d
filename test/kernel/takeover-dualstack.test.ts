/**
 * `drover takeover` of a dual-stack node, with traffic running: drover's
 * iptables mode (kube-proxy's layout, in iptables-nft and ip6tables-nft)
 * taken over by nftables mode (`table ip drover` and `table ip6 drover`),
 * while long-lived TCP connections and a new connection every 50 ms go to
 * the IPv6 and the IPv4 ClusterIP of one dual-stack Service and to its
 * NodePort on the node's IPv6 address (test/fixtures/dualstack/, the
 * topology of test/support/dualstack.ts). No new connection may fail, no
 * long-lived one may break; both families' iptables state must be gone
 * when read back, both nftables tables there, and `drover diff` clean.
 * The namespaces and the scratch folder are removed, also on failure.
 */
import test from 'ava';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/kernel/exec.ts';
import { NFT } from '../../src/modes/nftables/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { CLUSTER_CIDRS, dualStackWorld } from '../support/dualstack.ts';
import { drover } from '../support/faults.ts';
import { underTraffic } from '../support/takeover.ts';

const unavailable = await testbedUnavailableReason();

if (unavailable) {
  test.skip(`dual-stack takeover tests skipped: ${unavailable}`, () => {});
} else {
  test('iptables → nftables on a dual-stack node, with traffic to the IPv6 and IPv4 ClusterIPs and the IPv6 NodePort: none failed, none lost, only nftables mode left in both families, diff clean', async (t) => {
    const { topo } = await dualStackWorld();
    const scratch = await mkdtemp(join(tmpdir(), 'drover-takeover-ds-'));
    t.teardown(async () => {
      await topo.destroy();
      await rm(scratch, { recursive: true, force: true });
    });
    const source = join(scratch, 'manifests');
    await mkdir(source);
    await copyFile('test/fixtures/dualstack/services.yaml', join(source, 'services.yaml'));
    const flags = ['--source', source, '--netns', topo.node, '--iptables-backend', 'nft', '--cluster-cidr', `${CLUSTER_CIDRS.IPv4},${CLUSTER_CIDRS.IPv6}`];
    const once = await drover(['sync', '--once', '--mode', 'iptables', ...flags]);
    t.is(once.code, 0, once.stderr);

    const r = await underTraffic(t, topo, 'iptables → nftables (dual-stack)', [
      ['IPv6 ClusterIP', { host: 'fd00:96::10', port: 80 }],
      ['IPv4 ClusterIP', { host: '10.96.0.10', port: 80 }],
      ['IPv6 NodePort', { host: topo.ipv6.nodeIp, port: 30080 }],
    ], () => drover(['takeover', '--mode', 'nftables', ...flags]));
    t.is(r.code, 0, r.stdout + r.stderr);
    // The ClusterIPs of web (2), v6only (1) and empty (2), and web's NodePort on each of the node's four addresses of both families.
    t.regex(r.stdout, /^checked 9 frontends: the same endpoints in iptables mode and nftables mode$/m);
    t.regex(r.stdout, /only nftables mode's state is left/);

    // Read back: no KUBE chain in either family's nat table, both drover tables.
    for (const save of ['iptables-nft-save', 'ip6tables-nft-save']) {
      const nat = await run(save, ['-t', 'nat'], { netns: topo.node });
      t.notRegex(nat.stdout, /^:KUBE-/m, `${save}: the old state is gone`);
    }
    const tables = await run(NFT, ['list', 'tables'], { netns: topo.node });
    t.deepEqual(tables.stdout.trim().split('\n').filter((l) => l.includes('drover')).sort(), ['table ip drover', 'table ip6 drover']);
    const diff = await drover(['diff', '--mode', 'nftables', ...flags]);
    t.deepEqual([diff.code, diff.stdout], [0, 'table ip drover:\nno differences\ntable ip6 drover:\nno differences\n'], diff.stderr);
  });
}
