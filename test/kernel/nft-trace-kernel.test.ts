/**
 * `drover trace --kernel` in nftables mode, in a throw-away testbed: the
 * packet-flow Services (test/support/packet-flow.ts) programmed by nftables
 * mode, then the command itself, as a user runs it, for a ClusterIP with
 * endpoints (from a pod namespace), a NodePort (from a client outside the
 * cluster CIDR), a ClusterIP without endpoints (REJECT) and a ClusterIP
 * from the node itself over UDP. Each time the kernel's path must match the
 * evaluator's, name the rule that picked the endpoint or refused, and
 * leave table ip drover as it was (read back with nft). A rule added by
 * hand that the evaluator cannot read makes them differ: MISMATCH, exit 1.
 */
import test, { type ExecutionContext } from 'ava';
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { run, type RunResult } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { createTopology, testbedUnavailableReason, type Topology } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { BACKENDS, CLIENTS, CLUSTER_CIDR, LB_IP, NODE_IP, STATE } from '../support/packet-flow.ts';
import { DROVER } from '../support/drover-bin.ts';

const unavailable = await testbedUnavailableReason();
const NFT = '/usr/sbin/nft';
const ENDPOINTS = BACKENDS.map((b) => `${b.ip}:8080`);
let topo: Topology;

/** `drover ARGS --mode nftables --netns NODE` as a user runs it. */
function drover(...args: string[]): Promise<RunResult> {
  return run(process.execPath, [DROVER, ...args, '--mode', 'nftables', '--netns', topo.node], { allowFail: true, timeoutMs: 120_000 });
}

/** `nft -j list table ip drover` in the node namespace, without the set elements' order mattering: chains and their rules' comments. */
async function chains(): Promise<string[]> {
  const r = await run('ip', ['netns', 'exec', topo.node, NFT, '-j', 'list', 'table', 'ip', 'drover']);
  const items = (JSON.parse(r.stdout) as { nftables: Record<string, { name?: string; chain?: string; comment?: string; handle: number }>[] }).nftables;
  return items.flatMap((i) => (i.chain ? [`chain ${i.chain.name}`] : i.rule ? [`rule ${i.rule.chain} ${i.rule.handle} ${i.rule.comment}`] : []));
}

/** Check that the kernel's path matched and the table is back as it was; returns the kernel's part of the text. */
async function matched(t: ExecutionContext, r: RunResult, before: readonly string[]): Promise<string> {
  t.is(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const kernel = r.stdout.slice(r.stdout.indexOf('\nkernel: ') + 1);
  t.regex(kernel, /\nMATCH: the kernel took the evaluator's (branch|path): /);
  t.deepEqual(await chains(), before, 'the trace chains are gone and nothing else changed');
  return kernel;
}

if (unavailable) {
  test.skip(`trace --kernel tests skipped: ${unavailable}`, () => {});
} else {
  let before: string[];
  test.before(async () => {
    topo = await createTopology({ backends: BACKENDS, nodeIp: NODE_IP, clients: CLIENTS });
    await topo.exec(topo.node, 'ip', ['route', 'add', 'local', `${LB_IP}/32`, 'dev', 'lo']);
    const nft = new SystemNft({ netns: topo.node });
    await new NftablesBackend({ nft, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, frontends: { nodePortIPs: [NODE_IP] }, logger: silentLogger() }).sync(STATE, {
      full: true,
      changed: new Set(),
    });
    before = await chains();
  });

  test.after.always(async () => {
    await topo?.destroy();
  });

  test.serial('a ClusterIP with endpoints, from a pod: the kernel DNATs to one endpoint through the pick rule, as one of the evaluator\'s branches', async (t) => {
    const pod = topo.client('pod');
    const r = await drover('trace', '--src', pod.ip, '--dst', '10.96.0.10:80', '--kernel', '--probe-from', pod.netns);
    const kernel = await matched(t, r, before);
    t.regex(kernel, new RegExp(`^kernel: one tcp probe ${pod.ip.replace(/\./g, '\\.')}:\\d+ -> 10\\.96\\.0\\.10:80, sent from namespace ${pod.netns} \\(connected\\)`));
    t.regex(kernel, /\nip drover pick\n {2}rule 4 +handle \d+ +accept {2}comment "one of 3 endpoints, any protocol"\n/);
    const endpoint = /\nkernel verdict: DNAT to (\S+), not masqueraded\n/.exec(kernel)?.[1];
    t.true(endpoint !== undefined && ENDPOINTS.includes(endpoint), `kernel verdict names an endpoint: ${endpoint}`);
    t.regex(kernel, new RegExp(`\\nMATCH: the kernel took the evaluator's branch: DNAT to ${endpoint!.replace(/\./g, '\\.')}, not masqueraded \\(33\\.33% of new connections\\)\\n$`));
  });

  test.serial('a NodePort from outside the cluster CIDR: DNAT, masqueraded, as the evaluator says; --json carries both answers', async (t) => {
    const outside = topo.client('outside');
    const r = await drover('trace', '--src', outside.ip, '--dst', `${NODE_IP}:30080`, '--kernel', '--probe-from', outside.netns, '--json');
    t.is(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as {
      evaluator: { outcomes: { verdict: { kind: string; ip?: string; port?: number }; masqueraded: boolean }[] };
      kernel: { probe: { from: string; result: string }; path: { verdict: { kind: string; ip: string; port: number }; masqueraded: boolean; steps: { chain: string; comment?: string }[] }; comparison: { match: boolean; branch: number } };
      match: boolean;
    };
    t.true(out.match);
    t.deepEqual(out.kernel.probe, { from: outside.netns, result: 'connected' });
    t.true(out.kernel.path.masqueraded);
    const v = out.kernel.path.verdict;
    t.true(v.kind === 'dnat' && ENDPOINTS.includes(`${v.ip}:${v.port}`));
    t.deepEqual(out.evaluator.outcomes[out.kernel.comparison.branch]!.verdict, { kind: 'dnat', ip: v.ip, port: v.port });
    t.true(out.kernel.path.steps.some((s) => s.chain === 'masquerading' && s.comment === 'service traffic requiring SNAT'));
    t.deepEqual(await chains(), before);
  });

  test.serial('a ClusterIP without endpoints: the kernel rejects at the endpoints check, the rule the evaluator names', async (t) => {
    const pod = topo.client('pod');
    const kernel = await matched(t, await drover('trace', '--src', pod.ip, '--dst', '10.96.0.13:80', '--kernel', '--probe-from', pod.netns), before);
    t.regex(kernel, /\(ECONNREFUSED\)/);
    t.regex(kernel, /\nip drover endpoints-check\n {2}rule 1 +handle \d+ +drop {2}comment "frontend has no endpoints"\n/);
    t.regex(kernel, /\nkernel verdict: REJECTed \(ip drover endpoints-check rule 1\)\n/);
  });

  test.serial("a UDP probe from the node itself to a TCP-only ClusterIP: sent from the node namespace, left alone by drover's rules, as the evaluator says", async (t) => {
    const kernel = await matched(t, await drover('trace', '--src', NODE_IP, '--dst', '10.96.0.10:80', '--proto', 'udp', '--kernel'), before);
    t.regex(kernel, new RegExp(`^kernel: one udp probe 192\\.168\\.100\\.1:\\d+ -> 10\\.96\\.0\\.10:80, sent from namespace ${topo.node} \\(sent\\)`));
    // UDP port 80 has a service port only for TCP in the packet-flow table: the kernel leaves it alone, as the evaluator does.
    t.regex(kernel, /\nkernel verdict: untouched by drover's rules\n/);
  });

  test.serial('a rule added by hand that the evaluator cannot read: MISMATCH, exit 1, and the rule and the table are left as they were', async (t) => {
    await run('ip', ['netns', 'exec', topo.node, NFT, 'insert', 'rule', 'ip', 'drover', 'services', 'meta', 'l4proto', 'tcp', 'counter', 'comment', '"by hand"']);
    const withRule = await chains();
    t.teardown(async () => {
      const handle = /rule services (\d+) by hand/.exec(withRule.join('\n'))?.[1];
      if (handle) await run('ip', ['netns', 'exec', topo.node, NFT, 'delete', 'rule', 'ip', 'drover', 'services', 'handle', handle], { allowFail: true });
    });
    const pod = topo.client('pod');
    const r = await drover('trace', '--src', pod.ip, '--dst', '10.96.0.10:80', '--kernel', '--probe-from', pod.netns);
    t.is(r.code, 1, r.stderr);
    t.regex(r.stdout, /\nip drover services\n {2}rule 1 +handle \d+ +continue {2}comment "by hand"\n/);
    t.regex(r.stdout, /\nMISMATCH: after 1 rule\(s\) in common, the kernel took ip drover services rule 1 where the evaluator's closest branch takes no further rule\n$/);
    t.deepEqual(await chains(), withRule);
  });

  test.serial('refused: --kernel outside nftables mode, a source outside the node without --probe-from, a namespace without table ip drover', async (t) => {
    const ipt = await run(process.execPath, [DROVER, 'trace', '--src', NODE_IP, '--dst', '10.96.0.10:80', '--kernel', '--netns', topo.node], { allowFail: true });
    t.is(ipt.code, 1);
    t.is(ipt.stderr, 'drover: trace --kernel is built for --mode nftables only (the probe is marked with meta nftrace in table ip drover); iptables mode has no kernel trace\n');
    const outside = await drover('trace', '--src', topo.client('outside').ip, '--dst', '10.96.0.10:80', '--kernel');
    t.is(outside.code, 1);
    t.regex(outside.stderr, /^drover: --src 192\.168\.100\.2 is not an address of the node: .* name it with --probe-from NETNS\n$/);
    t.deepEqual(await chains(), before);
    await withNetns(async (netns) => {
      await run('ip', ['netns', 'exec', netns, 'ip', 'link', 'set', 'lo', 'up']);
      const r = await run(process.execPath, [DROVER, 'trace', '--mode', 'nftables', '--netns', netns, '--src', '127.0.0.1', '--dst', '10.96.0.10:80', '--kernel'], { allowFail: true });
      t.is(r.code, 1);
      t.regex(r.stderr, new RegExp(`drover: no table ip drover in namespace ${netns}: trace --kernel adds its trace rule to drover's table only\\n$`));
      t.is((await run('ip', ['netns', 'exec', netns, NFT, 'list', 'tables'])).stdout, '', 'no table was created');
    });
  });
}
