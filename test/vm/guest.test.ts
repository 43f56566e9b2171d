/**
 * Smoke test of the IPVS guest (scripts/vm/): IPVS, dummy links and network
 * namespaces work, as drover's IPVS mode needs them. Meant to run inside the
 * guest: `npm run test:vm` (scripts/vm/test.sh) boots it and runs
 * `npx ava test/vm/` there. Every check runs in a fresh `unshare -n`
 * namespace, so even on a host with IPVS nothing outside it is touched.
 *
 * Where IPVS is not available (this host kernel has no ip_vs) a single
 * `test.skip` is registered with the reason in its title. Inside the guest
 * (DROVER_IN_GUEST=1) a missing IPVS is a failure instead: the guest is broken.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);
const inGuest = process.env.DROVER_IN_GUEST === '1';

/** Runs a shell script in a new, empty network namespace. */
async function inNetns(script: string): Promise<string> {
  const { stdout } = await execFileP('unshare', ['-n', 'sh', '-ec', script], { timeout: 60_000 });
  return stdout;
}

function firstLine(err: unknown): string {
  const e = err as { stderr?: string; message?: string; code?: unknown };
  if (e.code === 'ENOENT') return 'unshare is not installed';
  const text = (e.stderr || e.message || String(err)).trim();
  return text.split('\n')[0] ?? text;
}

/** Why IPVS tests cannot run here, or null when they can. */
async function ipvsUnavailableReason(): Promise<string | null> {
  if (process.platform !== 'linux') return `needs Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'needs root (ipvsadm and network namespaces)';
  try {
    // The kernel first: its generic netlink family IPVS exists only with ip_vs.
    await inNetns('! command -v genl >/dev/null || genl ctrl get name IPVS >/dev/null');
  } catch (err) {
    return `this kernel has no IPVS (generic netlink family IPVS: ${firstLine(err)})`;
  }
  try {
    await inNetns('command -v ipvsadm >/dev/null || { echo "ipvsadm is not installed" >&2; exit 1; }; ipvsadm -Ln');
    return null;
  } catch (err) {
    return `ipvsadm -Ln fails: ${firstLine(err)}`;
  }
}

const unavailable = await ipvsUnavailableReason();

if (unavailable && !inGuest) {
  test.skip(`IPVS guest tests skipped: ${unavailable}; run them in the VM with npm run test:vm (scripts/vm/test.sh)`, () => {});
} else if (unavailable) {
  test('the guest has IPVS', (t) => {
    t.fail(`DROVER_IN_GUEST=1 but ${unavailable}`);
  });
} else {
  test('ipvsadm -Ln works and a fresh namespace has an empty IPVS table', async (t) => {
    const out = await inNetns('ipvsadm -Ln');
    t.regex(out, /IP Virtual Server version \d+\.\d+\.\d+/);
    t.notRegex(out, /^(TCP|UDP|SCTP)\s/m, 'no virtual servers in a new namespace');
  });

  test('a kube-ipvs0 dummy link can be created and holds a ClusterIP', async (t) => {
    const out = await inNetns(
      [
        'ip link add kube-ipvs0 type dummy',
        'ip addr add 10.96.0.1/32 dev kube-ipvs0',
        'ip -o link show kube-ipvs0',
        'ip -o -4 addr show dev kube-ipvs0',
      ].join('\n'),
    );
    t.regex(out, /^\d+: kube-ipvs0: /m);
    t.regex(out, /inet 10\.96\.0\.1\/32 /);
  });

  test('a round-robin virtual server with a real server is listed', async (t) => {
    const out = await inNetns(
      [
        'ip link add kube-ipvs0 type dummy',
        'ip addr add 10.96.0.1/32 dev kube-ipvs0',
        'ipvsadm -A -t 10.96.0.1:80 -s rr',
        'ipvsadm -a -t 10.96.0.1:80 -r 10.244.1.2:8080 -m',
        'ipvsadm -Ln',
      ].join('\n'),
    );
    t.regex(out, /^TCP\s+10\.96\.0\.1:80 rr\s*$/m);
    t.regex(out, /->\s+10\.244\.1\.2:8080\s+Masq\s+1\s/);
  });
}
