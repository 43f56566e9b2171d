/**
 * `drover sync --once --mode ipvs` and `drover run --mode ipvs` as a user
 * runs them: started inside a fresh network namespace of the guest
 * (`ip netns exec NS node bin/drover.js ...`, since netlink sockets act in
 * the namespace of their process), on Kubernetes manifests in a folder.
 * The kernel is read back with ipvsadm, ip, ipset and iptables-save. One
 * namespace goes through the whole sequence (sync --once, drift by hand,
 * run, a manifest change, status, stop, cleanup): the restart that repairs
 * the drift is `drover run`'s first full sync.
 * The periodic drift check of `drover run --mode ipvs` on the real kernel
 * (nothing found after drover's own syncs; a real server deleted by hand
 * repaired) is in ipvs-faults.test.ts, under traffic.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/testbed/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { DROVER, drover, list, service, slice, START_MS } from './support/cli.ts';
import { ipvsadmState, registerIpvsTests, until } from './support/env.ts';

function manifests(webIps: string[]): string {
  return list([
    service('web', '10.96.0.10', 80, 'TCP'),
    slice('web', webIps, 80, 'TCP'),
    service('dns', '10.96.0.53', 53, 'UDP'),
    slice('dns', ['10.244.2.2'], 53, 'UDP'),
    service('sticky', '10.96.0.20', 8443, 'TCP', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } }),
    slice('sticky', ['10.244.3.2'], 8443, 'TCP'),
    service('empty', '10.96.0.11', 80, 'TCP'),
  ]);
}

const EXPECTED = [
  'TCP 10.96.0.10:80 rr',
  '-> 10.244.1.2:80 Masq 1',
  '-> 10.244.1.3:80 Masq 1',
  'TCP 10.96.0.11:80 rr',
  'TCP 10.96.0.20:8443 rr persistent 600',
  '-> 10.244.3.2:8443 Masq 1',
  'UDP 10.96.0.53:53 rr',
  '-> 10.244.2.2:53 Masq 1',
];

/** Log lines (pino JSON) of a drover run, parsed. */
function logLines(stderr: string): Record<string, unknown>[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

if (await registerIpvsTests('IPVS CLI tests')) {
  // One namespace through a user's whole sequence: each `drover` start costs seconds under emulation, so the
  // restart that repairs drift and adopts what is not drover's is `drover run`'s first full sync, not a second
  // `sync --once`.
  test.serial('sync --once --mode ipvs programs exactly the desired state; run --mode ipvs repairs drift, adopts the rest and follows the manifests; cleanup --mode ipvs removes what it made', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-ipvs-'));
    const statusDir = await mkdtemp(join(tmpdir(), 'drover-ipvs-status-'));
    try {
      await writeFile(join(dir, 'cluster.json'), manifests(['10.244.1.2', '10.244.1.3']));
      await withNetns(async (netns) => {
        const first = await drover(netns, ['sync', '--once', '--mode', 'ipvs', '--source', dir, '--cluster-cidr', '10.244.0.0/16']);
        t.is(first.code, 0, first.stderr);
        const msgs = logLines(first.stderr).map((l) => String(l.msg));
        t.true(
          msgs.includes('set sysctls net.ipv4.vs.conntrack, net.ipv4.vs.expire_nodest_conn, net.ipv4.vs.expire_quiescent_template, net.ipv4.ip_forward'),
          msgs.join('\n'),
        );
        t.deepEqual(await ipvsadmState(netns), EXPECTED);
        const addrs = await run('ip', ['-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'], { netns });
        t.deepEqual(
          addrs.stdout.split('\n').filter(Boolean).map((l) => l.split(/\s+/)[3]),
          ['10.96.0.10/32', '10.96.0.53/32', '10.96.0.20/32', '10.96.0.11/32'].sort(),
        );
        const sets = (await run('ipset', ['save'], { netns })).stdout.split('\n').filter((l) => l.startsWith('add ')).sort();
        t.deepEqual(sets, [
          'add KUBE-CLUSTER-IP 10.96.0.10,tcp:80',
          'add KUBE-CLUSTER-IP 10.96.0.11,tcp:80',
          'add KUBE-CLUSTER-IP 10.96.0.20,tcp:8443',
          'add KUBE-CLUSTER-IP 10.96.0.53,udp:53',
          'add KUBE-IPVS-IPS 10.96.0.10',
          'add KUBE-IPVS-IPS 10.96.0.11',
          'add KUBE-IPVS-IPS 10.96.0.20',
          'add KUBE-IPVS-IPS 10.96.0.53',
          'add KUBE-LOOP-BACK 10.244.1.2,tcp:80,10.244.1.2',
          'add KUBE-LOOP-BACK 10.244.1.3,tcp:80,10.244.1.3',
          'add KUBE-LOOP-BACK 10.244.2.2,udp:53,10.244.2.2',
          'add KUBE-LOOP-BACK 10.244.3.2,tcp:8443,10.244.3.2',
        ]);
        const nat = (await run('iptables-save', ['-t', 'nat'], { netns })).stdout;
        t.regex(nat, /^-A KUBE-SERVICES ! -s 10\.244\.0\.0\/16 -m comment --comment "Kubernetes service cluster ip \+ port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ$/m);
        t.regex(nat, /^-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE$/m);

        // Drift behind drover's back.
        await run('ipvsadm', ['-d', '-t', '10.96.0.10:80', '-r', '10.244.1.3:80'], { netns });
        await run('ipvsadm', ['-A', '-t', '10.100.0.1:443', '-s', 'rr'], { netns });
        await run('ipvsadm', ['-A', '-t', '192.168.77.1:80', '-s', 'rr'], { netns });
        await run('ip', ['addr', 'add', '10.96.9.9/32', 'dev', 'kube-ipvs0'], { netns });

        const child = spawn(
          'ip',
          [
            'netns', 'exec', netns, process.execPath, DROVER, 'run', '--mode', 'ipvs', '--source', dir, '--cluster-cidr', '10.244.0.0/16',
            '--min-sync-period', '200ms', '--sync-period', '5s', '--ipvs-graceful-period', '30s', '--status-file', join(statusDir, 'status.json'),
          ],
          { stdio: ['ignore', 'ignore', 'pipe'] },
        );
        let stderr = '';
        child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
        const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
        // A drover that has stopped will log nothing more: fail at once, with what it said.
        const logged = (msg: string) => async () => {
          if (stderr.includes(`"msg":"${msg}"`)) return true;
          if (child.exitCode !== null || child.signalCode !== null) throw new Error(`drover run exited (${child.exitCode ?? child.signalCode}) before "${msg}":\n${stderr}`);
          return false;
        };
        try {
          await until('the first full sync', logged('full sync done'), START_MS, 250).catch((e: Error) => {
            throw new Error(`${e.message}; drover run said:\n${stderr.slice(-4000)}`);
          });
          // The restart repaired the drift, left what is not drover's alone, and wrote nothing else.
          const applied = logLines(stderr).find((l) => l.msg === 'ipvs: sync applied');
          t.like(applied, { ops: { 'add-dest': 1, 'del-service': 1 }, addressesAdded: 0, addressesRemoved: 1, ipsetAdded: 0, ipsetDeleted: 0 });
          t.false(logLines(stderr).some((l) => String(l.msg).startsWith('set sysctls')), 'sysctls already set: nothing written');
          const full = logLines(stderr).find((l) => l.msg === 'full sync done');
          t.like(full, { transactions: 0, bytes: 0 }, 'no ipset or iptables change on a restart');
          // ipvsadm sorts by protocol, then by the difference of the addresses as
          // a signed int (libipvs ipvs_cmp_services), so 192.168.77.1 lists first.
          t.deepEqual(await ipvsadmState(netns), ['TCP 192.168.77.1:80 rr', ...EXPECTED]);
          const after = await run('ip', ['-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0'], { netns });
          t.false(after.stdout.includes('10.96.9.9'));
          await run('ipvsadm', ['-D', '-t', '192.168.77.1:80'], { netns });

          await writeFile(join(dir, 'cluster.json'), manifests(['10.244.1.2']));
          await until('a partial sync', logged('partial sync done'), 60_000, 250);
          t.deepEqual(await ipvsadmState(netns), EXPECTED.filter((l) => l !== '-> 10.244.1.3:80 Masq 1'));
          const partial = logLines(stderr).find((l) => l.msg === 'partial sync done');
          t.like(partial, { mode: 'ipvs', full: false, changed: ['default/web:p'] });

          // status follows the mode drover run recorded, and reads IPVS state from the kernel.
          const status = await drover(netns, ['status', '--status-file', join(statusDir, 'status.json')]);
          t.is(status.code, 0, status.stderr);
          t.log(`\n${status.stdout}`);
          for (const line of [
            /^mode: {8}ipvs$/m,
            /^ipvs: {8}4 virtual servers, 3 real servers in the kernel$/m,
            /^ipsets: {6}11 entries \(KUBE-CLUSTER-IP 4, KUBE-LOOP-BACK 3, KUBE-IPVS-IPS 4\)$/m,
            /^kube-ipvs0: {2}4 addresses$/m,
            /^rules: {7}46 drover-owned rules in the kernel \(filter 23, nat 23\)$/m,
            /^last sync: {3}\S+ \(\d+ (?:s|min) ago\), partial, [\d.]+ ms, ok$/m,
            /^drift: {7}no$/m,
          ]) {
            t.regex(status.stdout, line);
          }
        } finally {
          child.kill('SIGTERM');
        }
        t.is(await exited, 0, stderr);
        t.regex(stderr, /"msg":"stopping; programmed rules are left in place"/);
        t.deepEqual(await ipvsadmState(netns), EXPECTED.filter((l) => l !== '-> 10.244.1.3:80 Masq 1'), 'IPVS state stays after drover stops');

        // cleanup removes IPVS mode's state and leaves a foreign virtual server alone.
        await run('ipvsadm', ['-A', '-t', '192.168.77.1:80', '-s', 'rr'], { netns });
        const cleanup = await drover(netns, ['cleanup', '--mode', 'ipvs']);
        t.is(cleanup.code, 0, cleanup.stderr);
        t.is(cleanup.stdout, 'removed 15 chains and 9 hook rules\n', '12 chains of IPVS mode and its 3 canaries');
        t.deepEqual(await ipvsadmState(netns), ['TCP 192.168.77.1:80 rr']);
        const link = await run('ip', ['link', 'show', 'kube-ipvs0'], { netns, allowFail: true });
        t.not(link.code, 0, 'kube-ipvs0 is gone');
        t.notRegex((await run('ipset', ['save'], { netns })).stdout, /KUBE-/);
        t.notRegex((await run('iptables-save', [], { netns })).stdout, /KUBE-/);
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
      await rm(statusDir, { recursive: true, force: true });
    }
  });
}
