/**
 * `drover takeover` with traffic running, between drover's iptables mode
 * (kube-proxy's own iptables layout, so this pair also stands for a node
 * that kube-proxy's iptables mode left) and its nftables mode, both ways:
 * long-lived TCP connections held open and a new connection every 50 ms,
 * to a ClusterIP and to a NodePort, from the client namespace, and the
 * same over UDP (long-lived flows each kept on one source port, a new
 * source port every 50 ms); no new connection may fail, no long-lived one
 * may break or (UDP) move to another endpoint, the old state must be
 * gone when read back, and `drover diff` must be clean. Then what stops a
 * takeover: a frontend the two states send elsewhere (nothing removed),
 * something on kube-proxy's healthz port (nothing changed), and a dry run
 * (nothing changed). Every test that changes the node builds its own
 * namespaces; the three refusals that must change nothing (each reads the
 * node back before and after to show it) share one node, programmed once
 * in iptables mode. All are removed, also on failure.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, copyFile, readFile, writeFile } from 'node:fs/promises';
import { run, runCommand } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { NFT } from '../../src/modes/nftables/exec.ts';
import { join } from 'node:path';
import { assertConverged, CLUSTER_IP, drover, manifestWorld, openManifestWorld, reached, runFlags, startDrover, type ManifestWorld, type OwnedWorld, type RunningDrover } from '../support/faults.ts';
import { until } from '../support/wait.ts';
import { IPTABLES_TO_NFTABLES_PLAN, underTraffic, type TrafficFrontend } from '../support/takeover.ts';

const unavailable = await testbedUnavailableReason();

const NODE_PORT = 30080;
const UDP_NODE_PORT = 30053;

/** Service web: ClusterIP CLUSTER_IP:80 and NodePort 30080 over TCP (and, with `udp`, CLUSTER_IP:53 and NodePort 30053 over UDP), endpoints `ips`:8080. */
const web = (ips: readonly string[], udp = false) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: nsd}\nspec: {type: NodePort, clusterIP: ${CLUSTER_IP}, ports: [{name: http, port: 80, nodePort: ${NODE_PORT}, protocol: TCP}${udp ? `, {name: dns, port: 53, nodePort: ${UDP_NODE_PORT}, protocol: UDP}` : ''}]}\n---\n` +
  `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: nsd, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}${udp ? ', {name: dns, port: 8080, protocol: UDP}' : ''}]\nendpoints:\n${ips.map((i) => `  - {addresses: [${i}], conditions: {ready: true}}\n`).join('')}`;

/** The Services the real kube-proxy programmed (test/fixtures/kube-proxy-nftables/services.yaml), and its table for them (table.nft). */
const KUBE_PROXY_SERVICES = readFileSync(new URL('../fixtures/kube-proxy-nftables/services.yaml', import.meta.url), 'utf8');
const KUBE_PROXY_TABLE = readFileSync(new URL('../fixtures/kube-proxy-nftables/table.nft', import.meta.url), 'utf8');

const common = ['--iptables-backend', 'nft', '--service-cidr', '172.30.0.0/16', '--cluster-cidr', '10.180.0.0/16'];

/** Web's frontends over TCP and UDP (`web(…, true)`), for {@link underTraffic}. */
const webFrontends = (w: ManifestWorld): TrafficFrontend[] => [
  ['ClusterIP', { host: CLUSTER_IP, port: 80 }],
  ['NodePort', { host: w.topo.nodeIp, port: NODE_PORT }],
  ['UDP ClusterIP', { host: CLUSTER_IP, port: 53, protocol: 'udp' }],
  ['UDP NodePort', { host: w.topo.nodeIp, port: UDP_NODE_PORT, protocol: 'udp' }],
];

/** The flags of every command of a case: the source, the node namespace, the common flags. */
const flags = (w: ManifestWorld) => ['--source', w.source, '--netns', w.topo.node, ...common];

/** The node's iptables-nft nat and filter tables, and its whole nftables ruleset. */
async function kernelState(w: ManifestWorld): Promise<{ iptables: string; nft: string }> {
  const nat = await run('iptables-nft-save', ['-t', 'nat'], { netns: w.topo.node });
  const filter = await run('iptables-nft-save', ['-t', 'filter'], { netns: w.topo.node });
  const nft = await run(NFT, ['-s', 'list', 'ruleset'], { netns: w.topo.node });
  // iptables-save's header and trailer carry the time.
  const strip = (s: string) => s.split('\n').filter((l) => !l.startsWith('#')).join('\n');
  return { iptables: strip(nat.stdout) + strip(filter.stdout), nft: nft.stdout };
}

/** Whether the node holds kube-proxy's iptables layout (nat KUBE-NODEPORTS) and table ip drover. */
async function holds(w: ManifestWorld): Promise<{ iptables: boolean; nftables: boolean }> {
  const s = await kernelState(w);
  return { iptables: /^:KUBE-NODEPORTS /m.test(s.iptables), nftables: /^table ip drover /m.test(s.nft) };
}

/** Program `mode` once with `drover sync --once`. */
async function program(t: ExecutionContext, w: ManifestWorld, mode: string): Promise<void> {
  const r = await drover(['sync', '--once', '--mode', mode, ...flags(w)]);
  t.is(r.code, 0, r.stderr);
}

/** The lines of `stderr` that are not JSON log lines: what drover says to the user. */
const said = (stderr: string) => stderr.split('\n').filter((l) => l !== '' && !l.startsWith('{'));

if (unavailable) {
  test.skip(`takeover tests skipped: ${unavailable}`, () => {});
} else {
  /**
   * The node of the refusals that change nothing: web (b1, b2) programmed in
   * iptables mode, made by the first of them to ask and removed after the
   * last test, also on failure. Each of them shows that it changed nothing
   * (the node read back before and after), so each starts from that state.
   */
  let unchanged: Promise<ManifestWorld & OwnedWorld> | undefined;
  const unchangedWorld = (): Promise<ManifestWorld> =>
    (unchanged ??= (async () => {
      const w = await openManifestWorld(web(['10.180.0.1', '10.180.0.2']));
      const r = await drover(['sync', '--once', '--mode', 'iptables', ...flags(w)]).catch((err: Error) => ({ code: null, stdout: '', stderr: err.message }));
      if (r.code !== 0) {
        await w.destroy();
        throw new Error(`drover sync --once --mode iptables exited ${String(r.code)}: ${r.stderr}`);
      }
      return w;
    })());
  test.after.always(async () => {
    const w = await unchanged?.catch(() => undefined);
    await w?.destroy();
  });

  for (const [from, to] of [
    ['iptables', 'nftables'],
    ['nftables', 'iptables'],
  ] as const) {
    test.serial(`${from} → ${to} with TCP and UDP traffic to a ClusterIP and a NodePort: none failed, none lost, only ${to} mode's state left, diff clean`, async (t) => {
      const w = await manifestWorld(t, web(['10.180.0.1', '10.180.0.2'], true));
      await program(t, w, from);
      t.is(await reached(w), 'b1,b2');
      t.deepEqual(await holds(w), { iptables: from === 'iptables', nftables: from === 'nftables' });
      const r = await underTraffic(t, w.topo, `${from} → ${to}`, webFrontends(w), () => drover(['takeover', '--mode', to, ...flags(w)]));
      t.is(r.code, 0, r.stdout + r.stderr);
      // The ClusterIP and the NodePort on each of the node's two addresses, over TCP and over UDP.
      t.regex(r.stdout, /checked 6 frontends: the same endpoints/);
      t.regex(r.stdout, new RegExp(`only ${to} mode's state is left`));
      t.deepEqual(await holds(w), { iptables: to === 'iptables', nftables: to === 'nftables' }, 'the old state is gone, read back');
      t.is(await reached(w), 'b1,b2');
      await assertConverged(t, ['diff', '--mode', to, ...flags(w)]);
    });
  }

  test.serial('drover run --mode nftables --takeover on iptables state: the same takeover after its first full sync, with traffic; none failed, none lost', async (t) => {
    const w = await manifestWorld(t, web(['10.180.0.1', '10.180.0.2']));
    await program(t, w, 'iptables');
    let d!: RunningDrover;
    const said = () => d.lines(/^takeover$/).map((l) => String(l.line));
    await underTraffic(t, w.topo, 'run --takeover iptables → nftables', webFrontends(w).slice(0, 2), async () => {
      d = startDrover(['--mode', 'nftables', '--takeover', ...flags(w), '--state-dir', join(w.scratch, 'state'), ...runFlags(w)]);
      t.teardown(() => d.kill());
      await until('the takeover done', async () => said().some((l) => l.startsWith('done in')) || !d.alive, 60_000);
      return { stdout: said().join('\n') };
    });
    t.regex(said().at(-1) ?? '', /^done in [0-9]+ ms: only nftables mode's state is left$/, d.logs());
    t.deepEqual(await holds(w), { iptables: false, nftables: true }, 'the old state is gone, read back');
    t.true(d.alive, 'run goes on serving');
    await d.stop();
    await assertConverged(t, ['diff', '--mode', 'nftables', ...flags(w)]);
  });

  test.serial("kube-proxy's nftables table (the real kube-proxy's, loaded as it wrote it) → nftables, with TCP and UDP traffic: every frontend checked, none failed, none lost, its table gone, diff clean", async (t) => {
    const w = await manifestWorld(t, KUBE_PROXY_SERVICES);
    await run(NFT, ['-f', '-'], { netns: w.topo.node, input: KUBE_PROXY_TABLE });
    // kube-proxy's nftables mode serves NodePorts on the node's primary address only (nodePortAddresses "primary").
    const kpFlags = [...flags(w), '--nodeport-addresses', `${w.topo.nodeIp}/32`];
    const r = await underTraffic(t, w.topo, "kube-proxy's nftables → nftables", webFrontends(w), () => drover(['takeover', '--mode', 'nftables', ...kpFlags]));
    t.is(r.code, 0, r.stdout + r.stderr);
    // The ClusterIPs of the five service ports, and the NodePorts of web (TCP, UDP) and local on each of the node's two addresses.
    t.regex(r.stdout, /^checked 11 frontends: the same endpoints in kube-proxy's nftables mode and nftables mode$/m);
    t.regex(r.stdout, /^removed table ip kube-proxy$/m);
    t.regex(r.stdout, /only nftables mode's state is left/);
    t.false(/^table ip kube-proxy /m.test((await kernelState(w)).nft), 'kube-proxy\'s table is gone, read back');
    t.is(await reached(w), 'b1,b2');
    await assertConverged(t, ['diff', '--mode', 'nftables', ...kpFlags]);
  });

  test.serial("kube-proxy's nftables table sending a frontend elsewhere stops the takeover, naming it; with --force the table is deleted unchecked", async (t) => {
    // The source says web has one endpoint, b3; kube-proxy's table sends it to b1 and b2.
    const w = await manifestWorld(t, KUBE_PROXY_SERVICES.replace('  - {addresses: [10.180.0.1], conditions: {ready: true}, nodeName: node-b}\n  - {addresses: [10.180.0.2], conditions: {ready: true}, nodeName: node-b}\n', '  - {addresses: [10.180.0.3], conditions: {ready: true}, nodeName: node-b}\n'));
    await run(NFT, ['-f', '-'], { netns: w.topo.node, input: KUBE_PROXY_TABLE });
    const kpFlags = [...flags(w), '--nodeport-addresses', `${w.topo.nodeIp}/32`];
    const refused = await drover(['takeover', '--mode', 'nftables', ...kpFlags]);
    t.is(refused.code, 1, refused.stdout);
    const both = "kube-proxy's nftables mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode 10.180.0.3:8080";
    t.deepEqual(said(refused.stderr), [
      "drover: 4 of 11 frontends go elsewhere in kube-proxy's nftables mode than in nftables mode; nothing was removed (both are programmed now):",
      `  UDP 172.30.0.50:53 (nsd/web:dns ClusterIP): ${both}`,
      `  UDP ${w.topo.nodeIp}:30053 (nsd/web:dns NodePort): ${both}`,
      `  TCP 172.30.0.50:80 (nsd/web:http ClusterIP): ${both}`,
      `  TCP ${w.topo.nodeIp}:30080 (nsd/web:http NodePort): ${both}`,
    ]);
    t.true(/^table ip kube-proxy /m.test((await kernelState(w)).nft), 'kube-proxy\'s table is still there');
    const forced = await drover(['takeover', '--force', '--mode', 'nftables', ...kpFlags]);
    t.is(forced.code, 0, forced.stdout + forced.stderr);
    t.regex(forced.stdout, /^removed table ip kube-proxy \(unchecked: --force\)$/m);
    t.false(/^table ip kube-proxy /m.test((await kernelState(w)).nft));
  });

  test.serial('a frontend the old state sends elsewhere stops the takeover before anything is removed, naming it and both endpoint sets', async (t) => {
    const w = await manifestWorld(t, web(['10.180.0.1', '10.180.0.2']));
    await program(t, w, 'iptables');
    // The source now says web has one endpoint, b3: iptables mode's rules still send it to b1 and b2.
    await writeFile(w.file, web(['10.180.0.3']));
    const r = await drover(['takeover', '--mode', 'nftables', ...flags(w)]);
    t.is(r.code, 1, r.stdout);
    const lines = said(r.stderr);
    t.regex(lines[0]!, /^drover: [0-9]+ of [0-9]+ frontends go elsewhere in iptables mode than in nftables mode; nothing was removed/);
    t.true(lines.includes(`  TCP ${CLUSTER_IP}:80 (nsd/web:http ClusterIP): iptables mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode 10.180.0.3:8080`), lines.join('\n'));
    t.true(lines.some((l) => l.startsWith(`  TCP ${w.topo.nodeIp}:${NODE_PORT} (nsd/web:http NodePort): iptables mode 10.180.0.1:8080 10.180.0.2:8080, nftables mode`)), lines.join('\n'));
    t.deepEqual(await holds(w), { iptables: true, nftables: true }, "iptables mode's state is still there, beside nftables mode's");
  });

  test.serial("a listener on kube-proxy's healthz port refuses the takeover in one line; nothing changes", async (t) => {
    const w = await unchangedWorld();
    const before = await kernelState(w);
    const server = spawn('ip', ['netns', 'exec', w.topo.node, 'python3', '-m', 'http.server', '10256', '--bind', '127.0.0.1'], { stdio: 'ignore' });
    const exited = new Promise((r) => server.once('exit', r));
    t.teardown(async () => {
      server.kill('SIGKILL');
      await exited;
    });
    await until('the healthz listener', async () => (await runCommand('bash', ['-c', 'exec 3<>/dev/tcp/127.0.0.1/10256'], { netns: w.topo.node })).code === 0, 15_000);
    const r = await drover(['takeover', '--mode', 'nftables', ...flags(w)]);
    t.is(r.code, 1);
    t.deepEqual(said(r.stderr), ["drover: something answers on kube-proxy's healthz port 127.0.0.1:10256 in this network namespace; stop kube-proxy first; nothing was changed"]);
    t.deepEqual(await kernelState(w), before);
  });

  test.serial('a process named kube-proxy in the namespace refuses the takeover in one line naming its PID; one outside it does not', async (t) => {
    const w = await unchangedWorld();
    // A stand-in: sleep under the name kube-proxy (/proc/PID/comm), first outside the node namespace, then inside it.
    // Each sleeps until the test kills it, however long the drover commands beside it take.
    const bin = join(w.scratch, 'kube-proxy');
    await copyFile('/bin/sleep', bin);
    await chmod(bin, 0o755);
    const outside = spawn(bin, ['infinity'], { stdio: 'ignore' });
    const outsideExited = new Promise((r) => outside.once('exit', r));
    t.teardown(async () => {
      outside.kill('SIGKILL');
      await outsideExited;
    });
    const dry = await drover(['takeover', '--dry-run', '--mode', 'nftables', ...flags(w)]);
    t.is(dry.code, 0, dry.stderr);
    const inside = spawn('ip', ['netns', 'exec', w.topo.node, bin, 'infinity'], { stdio: 'ignore' });
    const insideExited = new Promise((r) => inside.once('exit', r));
    t.teardown(async () => {
      inside.kill('SIGKILL');
      await insideExited;
    });
    // ip netns exec execs the command: the child's PID is the stand-in's once it runs.
    await until('the stand-in runs', async () => (await readFile(`/proc/${inside.pid}/comm`, 'utf8').catch(() => '')).trim() === 'kube-proxy', 15_000);
    const before = await kernelState(w);
    const r = await drover(['takeover', '--mode', 'nftables', ...flags(w)]);
    t.is(r.code, 1);
    t.deepEqual(said(r.stderr), [`drover: kube-proxy is running in this network namespace (PID ${inside.pid}); stop it first; nothing was changed`]);
    t.deepEqual(await kernelState(w), before);
  });

  test.serial('a dry run prints what is there and the plan, and changes nothing', async (t) => {
    const w = await unchangedWorld();
    const before = await kernelState(w);
    const r = await drover(['takeover', '--dry-run', '--mode', 'nftables', ...flags(w)]);
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, `${IPTABLES_TO_NFTABLES_PLAN}dry run: nothing was changed\n`);
    t.deepEqual(await kernelState(w), before);
  });
}
