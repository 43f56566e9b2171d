/**
 * nftables mode's structure read over nf_tables netlink (kernel/nftables
 * client.ts readStructure, live-netlink.ts) against `nft -j -t list table`,
 * in a fresh network namespace per test: the table written as a full sync
 * writes it, then read back both ways. The netlink read must give what the
 * full sync compares (each set's types, each base chain's hook, each
 * chain's rules' comments, and the client ranges of the interval set
 * firewall-allow) exactly as nft's listing gives it, and a drifted rule,
 * chain or set must be found by it. Also: the affinity clean-up reads its
 * map over netlink, and a table and chains written with drover's own
 * NEWTABLE and NEWCHAIN messages list as nft's write of them. The netlink
 * reads and writes run in a child process inside the namespace (a netlink
 * socket acts on the namespace of the process that opens it).
 */
import test, { type ExecutionContext } from 'ava';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { IPFamily, Snapshot } from '../../src/model/types.ts';
import type { RenderOptions } from '../../src/config/render.ts';
import { NftablesBackend, planFullSync } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import type { LiveTable } from '../../src/modes/nftables/live.ts';
import type { StructurePlan } from '../../src/modes/nftables/plan.ts';
import { familyView } from '../../src/model/family.ts';
import { run } from '../../src/testbed/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { CLUSTER_CIDR, NODE_IP, STATE } from '../support/packet-flow.ts';
import { CLUSTER_CIDR6, NODE_IP6, STATE6 } from '../support/packet-flow6.ts';
import { STICKY, structureJson, type AffinityRun, type StructureJson, type StructureRead } from '../support/nft-structure-read.ts';
import { moduleArgv } from '../../src/util/node-module.ts';

const NFT = '/usr/sbin/nft';
/** node and test/support/nft-structure-read as this test runs: compiled, or the .ts through tsx. */
const SCRIPT = moduleArgv(import.meta.url, '../support/nft-structure-read');
const unavailable = (await testbedUnavailableReason()) ?? (existsSync(NFT) ? undefined : `${NFT} is not installed`);

/**
 * The IPv6 view (as dual-stack.ts hands it to the IPv6 table's backend) of the IPv6 state, with ClientIP affinity on
 * its first Service, so that the table has the affinity rules drover writes over netlink.
 */
const STATE6_STICKY: Snapshot = familyView(
  { ...STATE6, ipv6Services: new Map([...STATE6.ipv6Services!].map(([k, sp], i) => [k, i === 0 ? { ...sp, sessionAffinity: { timeoutSeconds: 30 } } : sp])) },
  'IPv6',
);

interface Case {
  readonly family: IPFamily;
  readonly state: Snapshot;
  readonly render: RenderOptions;
  readonly nodeIP: string;
  /** The elements of firewall-allow: the LoadBalancer IP's source range, and the LoadBalancer IP itself (the node's own traffic to it). */
  readonly firewall: readonly string[];
}

const CASES: readonly Case[] = [
  { family: 'IPv4', state: STATE, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, nodeIP: NODE_IP, firewall: ['198.51.100.10 . tcp . 80 . 192.168.100.0/24', '198.51.100.10 . tcp . 80 . 198.51.100.10'] },
  {
    family: 'IPv6',
    state: STATE6_STICKY,
    render: { family: 'IPv6', clusterCIDR: CLUSTER_CIDR6, masqueradeAll: false },
    nodeIP: NODE_IP6,
    firewall: ['2001:db8:100::10 . tcp . 80 . 2001:db8:100::10', '2001:db8:100::10 . tcp . 80 . fd00:100::/64'],
  },
];

/** The structure read over netlink inside `netns`. */
async function readByNetlink(netns: string, family: IPFamily): Promise<StructureRead> {
  const r = await run('ip', ['netns', 'exec', netns, ...SCRIPT, 'read', family], { timeoutMs: 60_000 });
  return JSON.parse(r.stdout) as StructureRead;
}

/** A full sync of `c` as drover writes it today, with nft (no element writer). */
async function writeTable(netns: string, c: Case): Promise<void> {
  const backend = new NftablesBackend({ nft: new SystemNft({ netns, family: c.family }), render: c.render, frontends: { nodePortIPs: [c.nodeIP] }, logger: silentLogger() });
  await backend.sync(c.state, { full: true, changed: new Set() });
}

/** Both reads of the table in `netns` (its structure, and the ranges of firewall-allow), checked equal; returns the netlink one. */
async function readBoth(t: ExecutionContext, netns: string, family: IPFamily, what: string): Promise<StructureRead> {
  const nft = new SystemNft({ netns, family });
  const byNft = structureJson(await nft.list({ terse: true }));
  const byNetlink = await readByNetlink(netns, family);
  t.deepEqual(byNetlink.live, byNft, `${what}: the netlink read gives what nft -j -t lists`);
  t.deepEqual(byNetlink.firewallAllow, [...((await nft.listSet('firewall-allow', 'set'))?.elements.keys() ?? [])].sort(), `${what}: firewall-allow reads as nft -j lists it`);
  return byNetlink;
}

/** What a full sync of `c` would change on the table read as `live`. */
function planOn(live: StructureJson, c: Case): StructurePlan {
  const table: LiveTable = {
    exists: live.exists,
    sets: new Map(Object.entries(live.sets).map(([name, s]) => [name, { ...s, elements: new Map() }])),
    chains: new Map(Object.entries(live.chains)),
  };
  return planFullSync(TableModel.fromLive(table), c.state, c.render, { nodePortIPs: [c.nodeIP] }, false).structure;
}

const nft = (netns: string, script: string) => run(NFT, ['-f', '-'], { netns, input: script });

if (unavailable) {
  test.skip(`nf_tables structure read tests skipped: ${unavailable}`, () => {});
} else {
  for (const c of CASES) {
    test.serial(`${c.family}: the table a full sync writes reads back over netlink as nft -j -t lists it, and a full sync on it changes nothing`, async (t) => {
      await withNetns(async (netns) => {
        const none = await readByNetlink(netns, c.family);
        t.false(none.live.exists, 'no table yet');
        t.deepEqual(none.rules, []);
        await writeTable(netns, c);
        const read = await readBoth(t, netns, c.family, 'as written');
        t.true(read.live.exists);
        t.deepEqual(read.firewallAllow, c.firewall, 'a prefix as network/bits, one address bare');
        t.true(Object.keys(read.live.chains).length >= 13, `${Object.keys(read.live.chains).length} chains`);
        t.deepEqual(read.live.chains['nat-prerouting'], { base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' }, comments: ['services'] });
        // The expressions of two rules, as the kernel holds them: a jump is an immediate verdict; a lookup of a frontend loads its three fields first.
        t.deepEqual(read.rules.find((r) => r.chain === 'nat-prerouting')?.exprs, ['immediate']);
        t.deepEqual(read.rules.find((r) => r.comment === 'not a frontend with endpoints')?.exprs, ['payload', 'meta', 'payload', 'lookup', 'immediate']);
        const plan = planOn(read.live, c);
        t.deepEqual(plan, { rebuild: false, addSets: [], writeChains: [], deleteSets: [], deleteChains: [] }, 'a full sync finds the structure in order');
        if (c.family === 'IPv6') {
          const record = read.rules.filter((r) => r.chain === 'affinity-prerouting');
          t.deepEqual(record.map((r) => r.comment), ['tcp affinity of 30 s', 'udp affinity of 30 s', 'sctp affinity of 30 s'], 'the rules written over netlink are read with their comments');
          t.true(record.every((r) => r.exprs.includes('dynset')));
        }
      });
    });
  }

  test.serial('IPv4: a drifted rule, base chain or set read over netlink is found as nft -j -t finds it', async (t) => {
    const c = CASES[0]!;
    await withNetns(async (netns) => {
      await writeTable(netns, c);
      let read = await readBoth(t, netns, c.family, 'as written');
      const gen = read.generation;

      // A rule deleted by another program: its chain is written again.
      const handle = read.rules.find((r) => r.comment === 'masquerade external traffic')!.handle;
      await nft(netns, `delete rule ip drover services handle ${handle}\n`);
      read = await readBoth(t, netns, c.family, 'a rule deleted');
      t.true(read.generation > gen, 'the generation moved');
      t.false(read.live.chains.services!.comments.includes('masquerade external traffic'));
      t.deepEqual(planOn(read.live, c).writeChains.map((ch) => ch.name), ['services']);

      // Client ranges of firewall-allow that are no prefix, or one address.
      await nft(netns, 'add element ip drover firewall-allow { 198.51.100.10 . tcp . 80 . 10.0.0.1-10.0.0.5, 198.51.100.10 . tcp . 80 . 10.9.9.9 }\n');
      read = await readBoth(t, netns, c.family, 'ranges added');
      t.true(read.firewallAllow.includes('198.51.100.10 . tcp . 80 . 10.0.0.1-10.0.0.5'));
      t.true(read.firewallAllow.includes('198.51.100.10 . tcp . 80 . 10.9.9.9'));

      // A stray set and chain: deleted.
      await nft(netns, 'add set ip drover stray { type ipv4_addr; }\nadd chain ip drover stray-chain\n');
      read = await readBoth(t, netns, c.family, 'a stray set and chain');
      t.deepEqual(read.live.sets.stray, { keyType: 'ipv4_addr' });
      const stray = planOn(read.live, c);
      t.deepEqual([stray.deleteSets, stray.deleteChains], [['stray'], ['stray-chain']]);

      // A set of another type: the table is written again whole.
      await nft(netns, 'flush chain ip drover masquerading\ndelete set ip drover hairpin\nadd set ip drover hairpin { type ipv4_addr . inet_service; }\n');
      read = await readBoth(t, netns, c.family, 'a set of another type');
      t.deepEqual(read.live.sets.hairpin, { keyType: 'ipv4_addr . inet_service' });
      t.true(planOn(read.live, c).rebuild);
    });
  });

  test.serial('IPv4: a base chain of another priority or policy read over netlink is found, and a full sync that lists nothing with nft mends a deleted rule', async (t) => {
    const c = CASES[0]!;
    await withNetns(async (netns) => {
      await writeTable(netns, c);
      const resync = async (): Promise<{ written: Record<string, number>; deleted: Record<string, number>; transactions: number; detail: unknown }> => {
        const r = await run('ip', ['netns', 'exec', netns, ...SCRIPT, 'resync', c.family, c.nodeIP], { timeoutMs: 60_000 });
        return JSON.parse(r.stdout) as { written: Record<string, number>; deleted: Record<string, number>; transactions: number; detail: unknown };
      };
      const before = await new SystemNft({ netns }).list();
      t.deepEqual(await resync(), { written: { 'set entry': 0, set: 0, chain: 0 }, deleted: { 'set entry': 0, set: 0, chain: 0 }, transactions: 0, detail: { mode: 'nftables', via: 'none', structural: false } }, 'a full sync reading over netlink (its nft listings fail) finds nothing to write');

      let read = await readByNetlink(netns, c.family);
      const handle = read.rules.find((r) => r.comment === 'masquerade external traffic')!.handle;
      await nft(netns, `delete rule ip drover services handle ${handle}\n`);
      const mended = await resync();
      t.is(mended.written.chain, 1, 'the chain short of a rule is written again');
      t.deepEqual(structureJson(await new SystemNft({ netns }).list()), structureJson(before), 'as it was');

      await nft(netns, 'chain ip drover filter-output { policy drop; }\n');
      read = await readBoth(t, netns, c.family, 'a policy of drop');
      t.is(read.live.chains['filter-output']!.base!.policy, 'drop');
      t.true(planOn(read.live, c).rebuild);

      await nft(netns, 'chain ip drover filter-output { policy accept; }\nflush chain ip drover filter-input\ndelete chain ip drover filter-input\nadd chain ip drover filter-input { type filter hook input priority -50; policy accept; }\n');
      read = await readBoth(t, netns, c.family, 'a base chain of another priority');
      t.is(read.live.chains['filter-input']!.base!.priority, -50);
      t.true(planOn(read.live, c).rebuild);
    });
  });
}

if (!unavailable) {
  test.serial("IPv4: after a partial sync that removes an endpoint, the affinity entries that point to it are found by reading the map over netlink, and deleted", async (t) => {
    const c = CASES[0]!;
    await withNetns(async (netns) => {
      const r = await run('ip', ['netns', 'exec', netns, ...SCRIPT, 'affinity', c.family, c.nodeIP], { timeoutMs: 60_000 });
      const out = JSON.parse(r.stdout) as AffinityRun;
      t.false(out.cleanupFailed);
      t.deepEqual(out.left, [`192.168.100.3 . ${STICKY.frontend} : ${STICKY.b2} . 8080`], "b1's entry is gone, b2's stays");
      const byNft = (await new SystemNft({ netns }).listSet('affinity', 'map'))!.elements;
      t.deepEqual([...byNft.keys()], [`192.168.100.3 . ${STICKY.frontend}`], 'as nft lists the map');
    });
  });
}

if (!unavailable) {
  test.serial("a table and chains written with drover's own NEWTABLE and NEWCHAIN messages list as nft's write of the same objects does", async (t) => {
    const objects = fileURLToPath(new URL('../fixtures/nftables/objects.nft', import.meta.url));
    const listed = async (netns: string): Promise<unknown> => JSON.parse((await run(NFT, ['-j', 'list', 'table', 'ip', 'drover'], { netns })).stdout).nftables.filter((o: Record<string, unknown>) => !('metainfo' in o));
    const byNft = await withNetns(async (netns) => {
      await run(NFT, ['-f', objects], { netns });
      return listed(netns);
    });
    const byDrover = await withNetns(async (netns) => {
      const r = await run('ip', ['netns', 'exec', netns, ...moduleArgv(import.meta.url, '../support/nft-objects-write')], { timeoutMs: 60_000 });
      t.deepEqual(JSON.parse(r.stdout), [0, 0, 0, 0], 'every message ACKed');
      return listed(netns);
    });
    t.deepEqual(byDrover, byNft);
    t.is((byNft as unknown[]).length, 4, 'the table and its three chains');
  });
}
