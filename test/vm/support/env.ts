/**
 * Whether the IPVS tests of test/vm can run here. They need Linux, root,
 * `ip netns`, ipvsadm and ipset, and a kernel with IPVS: the drover test
 * guest (scripts/vm/) has all of them; this project's host kernel has no
 * ip_vs, so there the tests are skipped with the reason in the title.
 * Inside the guest (DROVER_IN_GUEST=1) a missing piece is a failure instead.
 */
import test, { type ExecutionContext } from 'ava';
import type { ProbeSummary, RequestResult } from '../../../src/testbed/probe.ts';
import { IpvsClient, IpvsUnavailableError } from '../../../src/kernel/ipvs/client.ts';
import { run } from '../../../src/testbed/exec.ts';
import { createTopology, testbedUnavailableReason, type Topology, type TopologySpec } from '../../../src/testbed/topology.ts';

/** True inside the drover test guest. */
export const IN_GUEST = process.env.DROVER_IN_GUEST === '1';

/** Why the IPVS VM tests cannot run here, or undefined when they can. */
export async function ipvsTestsUnavailableReason(): Promise<string | undefined> {
  const testbed = await testbedUnavailableReason();
  if (testbed) return testbed;
  try {
    (await IpvsClient.open()).close();
  } catch (err) {
    if (err instanceof IpvsUnavailableError) return 'this kernel has no IPVS (generic netlink family IPVS not found)';
    return `the IPVS family lookup failed: ${(err as Error).message}`;
  }
  for (const [cmd, args] of [['ipvsadm', ['--version']], ['ipset', ['--version']]] as const) {
    const r = await run(cmd, [...args], { allowFail: true, timeoutMs: 30_000 }).catch((e: Error) => e);
    if (r instanceof Error || r.code !== 0) return `${cmd} is not installed or does not run`;
  }
  return undefined;
}

/**
 * Register the tests of a file only where they can run: elsewhere one
 * `test.skip` whose title gives the reason (a failing test inside the guest,
 * where everything must be there).
 * @returns true when the caller should register its tests
 */
export async function registerIpvsTests(what: string): Promise<boolean> {
  const reason = await ipvsTestsUnavailableReason();
  if (!reason) return true;
  if (IN_GUEST) test(`${what}: the guest can run IPVS tests`, (t) => t.fail(`DROVER_IN_GUEST=1 but ${reason}`));
  else test.skip(`${what} skipped: ${reason}; run them in the VM with npm run test:vm`, () => {});
  return false;
}

/**
 * Deadline of one probe connection (connect and reply) where a test needs
 * every connection answered: on a busy host the emulated guest can hold one
 * for more than the testbed's default 2 s (seen: one ETIMEDOUT in 30 round
 * robin connections at load average 24). A dropped connection still fails,
 * only later.
 */
export const PROBE_TIMEOUT_MS = 10_000;

/** Wait until `check` resolves true, polling every `everyMs`; throws naming `what` after `timeoutMs`. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, everyMs = 500): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * `ipvsadm -Ln` inside `netns` (sorted, as ipvsadm sorts), normalised for
 * exact comparison: header lines dropped, single spaces, and destination lines
 * without their connection counters: "TCP 10.96.0.10:80 rr",
 * "TCP 10.96.0.20:80 rr persistent 10800", "-> 10.244.1.2:8080 Masq 1".
 */
export async function ipvsadmState(netns: string): Promise<string[]> {
  const r = await run('ipvsadm', ['-Ln'], { netns });
  return r.stdout
    .split('\n')
    .slice(3)
    .map((l) => l.trim().split(/\s+/))
    .filter((w) => w.length > 1)
    .map((w) => (w[0] === '->' ? w.slice(0, 4) : w).join(' '));
}

/** Active and inactive connections of one real server per `ipvsadm -Ln`, or undefined when it is not listed. */
export async function realServerConns(netns: string, vs: string, rs: string): Promise<{ weight: number; active: number; inactive: number } | undefined> {
  const r = await run('ipvsadm', ['-Ln', '-t', vs], { netns, allowFail: true });
  for (const line of r.stdout.split('\n')) {
    const w = line.trim().split(/\s+/);
    if (w[0] === '->' && w[1] === rs) return { weight: Number(w[3]), active: Number(w[4]), inactive: Number(w[5]) };
  }
  return undefined;
}

/**
 * The IPVS data-path testbed: a node namespace, endpoint namespaces
 * `backends`, and two clients, "outside" (192.168.100.2, outside the cluster
 * CIDR 10.244.0.0/16) and "inside" (10.244.9.2). With `ipv6`, the clients
 * get IPv6 addresses too: "outside" fd00:100::2, "inside" fd00:244:9::2 (a
 * pod's address when the IPv6 cluster CIDR is fd00:244::/32). ICMP rate
 * limiting is off in the node, for both families: IPVS refuses a
 * connection to a virtual server without real servers with an ICMP port
 * unreachable, which the kernel rate-limits per namespace.
 */
export async function createIpvsTopology(backends: TopologySpec['backends'], opts: { ipv6?: boolean } = {}): Promise<Topology> {
  const v6 = (ip6: string) => (opts.ipv6 ? { ip6 } : {});
  const topo = await createTopology({
    backends,
    clients: [
      { name: 'outside', ip: '192.168.100.2', ...v6('fd00:100::2') },
      { name: 'inside', ip: '10.244.9.2', ...v6('fd00:244:9::2') },
    ],
    readyTimeoutMs: 120_000,
  });
  await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv4.icmp_ratelimit=0']);
  if (opts.ipv6) await topo.exec(topo.node, 'sysctl', ['-q', '-w', 'net.ipv6.icmp.ratelimit=0']);
  return topo;
}

/** Distinct client addresses the backends saw in a probe, sorted. */
export const clientsSeen = (s: ProbeSummary): string[] => [...new Set(Object.values(s.clientsSeen).flat())].sort();

/** Assert that a connection attempt was dropped (it timed out), not refused and not answered. */
export function assertDropped(t: ExecutionContext, r: RequestResult, what: string): void {
  t.log(what, JSON.stringify(r));
  t.false(r.ok, `${what}: answered`);
  t.not((r as { code?: string }).code, 'ECONNREFUSED', `${what}: dropped (a timeout), not refused`);
}
