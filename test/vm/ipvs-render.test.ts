/**
 * `drover render --mode ipvs` replayed by hand: each section of its output
 * is applied with the tool it names (sysctls through /proc/sys, `ipset
 * restore -exist`, `iptables-restore --noflush`, `ip addr add` on a dummy
 * kube-ipvs0, `ipvsadm -R`) in a fresh network namespace of the guest. The
 * kernel then holds exactly what a sync would write: `ipvsadm -S -n` prints
 * the rendered lines back in the same order, and `drover diff --mode ipvs`
 * finds no difference.
 */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../src/testbed/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { drover, list, service, slice } from './support/cli.ts';
import { registerIpvsTests } from './support/env.ts';

const MANIFESTS = list([
  service('web', '10.96.0.10', 80, 'TCP'),
  slice('web', ['10.244.1.2', '10.244.1.3'], 80, 'TCP'),
  service('dns', '10.96.0.53', 53, 'UDP'),
  slice('dns', ['10.244.2.2'], 53, 'UDP'),
  service('sticky', '10.96.0.20', 8443, 'TCP', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } }),
  slice('sticky', ['10.244.3.2'], 8443, 'TCP'),
  service('empty', '10.96.0.11', 80, 'TCP'),
  service('sig', '10.96.0.9', 3868, 'SCTP'),
  slice('sig', ['10.244.4.2'], 3868, 'SCTP'),
]);

/** The lines of each `# TITLE` section of a render, by title. */
function sections(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('# ')) out.set(line.slice(2), (current = []));
    else if (line !== '') current?.push(line);
  }
  return out;
}

if (await registerIpvsTests('IPVS render tests')) {
  test.serial('render --mode ipvs replayed by hand gives what a sync writes: ipvsadm -S -n prints it back, diff finds nothing', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'drover-render-'));
    try {
      await writeFile(join(dir, 'cluster.json'), MANIFESTS);
      await withNetns(async (netns) => {
        const flags = ['--mode', 'ipvs', '--source', dir, '--cluster-cidr', '10.244.0.0/16'];
        const render = await drover(netns, ['render', ...flags]);
        t.is(render.code, 0, render.stderr);
        const s = sections(render.stdout);
        const ipvsadm = s.get('ipvsadm -R (the form ipvsadm -S -n prints)')!;
        t.deepEqual(ipvsadm, [
          '-A -t 10.96.0.10:80 -s rr',
          '-a -t 10.96.0.10:80 -r 10.244.1.2:80 -m -w 1',
          '-a -t 10.96.0.10:80 -r 10.244.1.3:80 -m -w 1',
          '-A -t 10.96.0.11:80 -s rr',
          '-A -t 10.96.0.20:8443 -s rr -p 600',
          '-a -t 10.96.0.20:8443 -r 10.244.3.2:8443 -m -w 1',
          '-A -u 10.96.0.53:53 -s rr',
          '-a -u 10.96.0.53:53 -r 10.244.2.2:53 -m -w 1',
          '-A --sctp-service 10.96.0.9:3868 -s rr',
          '-a --sctp-service 10.96.0.9:3868 -r 10.244.4.2:3868 -m -w 1',
        ]);

        for (const line of s.get('sysctls')!) {
          const [name, value] = line.split('=') as [string, string];
          await run('sh', ['-c', `echo ${value} > /proc/sys/${name.replaceAll('.', '/')}`], { netns });
        }
        await run('ipset', ['restore', '-exist'], { netns, input: `${s.get('ipset restore -exist')!.join('\n')}\n` });
        await run('iptables-restore', ['--noflush'], { netns, input: `${s.get('iptables-restore --noflush')!.join('\n')}\n` });
        await run('ip', ['link', 'add', 'kube-ipvs0', 'type', 'dummy'], { netns });
        for (const address of s.get('kube-ipvs0 (dummy, left down): addresses')!) await run('ip', ['addr', 'add', address, 'dev', 'kube-ipvs0'], { netns });
        await run('ipvsadm', ['-R'], { netns, input: `${ipvsadm.join('\n')}\n` });

        const saved = (await run('ipvsadm', ['-S', '-n'], { netns })).stdout.split('\n').filter(Boolean);
        t.deepEqual(saved, ipvsadm, 'ipvsadm -S -n prints the rendered lines back, in the same order');
        const diff = await drover(netns, ['diff', ...flags]);
        t.deepEqual([diff.code, diff.stdout], [0, 'no differences\n'], diff.stderr);
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}
