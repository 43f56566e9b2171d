/**
 * `drover chains` and `drover diff` against the real kernel, run as a user
 * runs them (bin/drover.js), in a fresh network namespace per variant: a
 * sync with the iptables backend, then rules changed behind drover's back
 * with iptables-restore in that namespace.
 */
import test from 'ava';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { SystemIptables, type IptablesVariant } from '../../src/kernel/iptables/exec.ts';
import { FileSource } from '../../src/sources/file.ts';
import { run } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { DROVER } from '../support/drover-bin.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const unavailable = await testbedUnavailableReason();
const variants: IptablesVariant[] = ['nft', 'legacy'];

const drover = (args: string[]) => run(process.execPath, [DROVER, ...args], { allowFail: true, timeoutMs: 60_000 });

/** default/linkding:http of examples/, as `iptables-save` prints it back. */
const LINKDING = `# default/linkding:http (nat KUBE-SERVICES)
-A KUBE-SERVICES -d 10.96.0.80/32 -p tcp -m comment --comment "default/linkding:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-4O55WZA47FGSYY6T
# default/linkding:http (nat KUBE-SVC-4O55WZA47FGSYY6T)
-A KUBE-SVC-4O55WZA47FGSYY6T ! -s 10.244.0.0/16 -d 10.96.0.80/32 -p tcp -m comment --comment "default/linkding:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-4O55WZA47FGSYY6T -m comment --comment "default/linkding:http -> 10.244.1.2:9090" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-WTGW2TRGZJ2KHZ6C
-A KUBE-SVC-4O55WZA47FGSYY6T -m comment --comment "default/linkding:http -> 10.244.1.3:9090" -j KUBE-SEP-MCATYO7FJOIKX4Z3
# default/linkding:http -> 10.244.1.2:9090 (nat KUBE-SEP-WTGW2TRGZJ2KHZ6C)
-A KUBE-SEP-WTGW2TRGZJ2KHZ6C -s 10.244.1.2/32 -m comment --comment "default/linkding:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-WTGW2TRGZJ2KHZ6C -p tcp -m comment --comment "default/linkding:http" -m tcp -j DNAT --to-destination 10.244.1.2:9090
# default/linkding:http -> 10.244.1.3:9090 (nat KUBE-SEP-MCATYO7FJOIKX4Z3)
-A KUBE-SEP-MCATYO7FJOIKX4Z3 -s 10.244.1.3/32 -m comment --comment "default/linkding:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-MCATYO7FJOIKX4Z3 -p tcp -m comment --comment "default/linkding:http" -m tcp -j DNAT --to-destination 10.244.1.3:9090
`;

/** Behind drover's back: delete linkding's KUBE-SVC chain (its jump first) and add a rule to KUBE-SERVICES. */
const HAND_EDIT = `*nat
-D KUBE-SERVICES -d 10.96.0.80/32 -p tcp -m comment --comment "default/linkding:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-4O55WZA47FGSYY6T
-F KUBE-SVC-4O55WZA47FGSYY6T
-X KUBE-SVC-4O55WZA47FGSYY6T
-A KUBE-SERVICES -d 10.96.0.99/32 -p tcp -m tcp --dport 81 -j KUBE-MARK-MASQ
COMMIT
`;

if (unavailable) {
  test.skip(`drover chains/diff kernel tests skipped: ${unavailable}`, () => {});
} else {
  for (const variant of variants) {
    test.serial(`iptables-${variant}: chains shows the live rules; diff reports hand edits (exit 1) until a sync repairs them (exit 0)`, async (t) => {
      const dir = await mkdtemp(join(tmpdir(), 'drover-inspect-'));
      try {
        await cp(join(ROOT, 'examples'), dir, { recursive: true });
        await withNetns(async (netns) => {
          const kernel = ['--netns', netns, '--iptables-backend', variant];
          const source = ['--source', dir, '--cluster-cidr', '10.244.0.0/16'];
          const { snapshot } = await new FileSource(dir, { serviceCIDR: '10.96.0.0/12', logger: silentLogger() }).load();
          const sync = () =>
            new IptablesBackend({
              exec: new SystemIptables({ variant, netns }),
              render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false },
              logger: silentLogger(),
            }).sync(snapshot, { full: true, changed: new Set() });
          await sync();

          const chains = await drover(['chains', 'default/linkding:http', ...kernel]);
          t.is(chains.stderr, '');
          t.is(chains.code, 0);
          t.is(chains.stdout, LINKDING);
          const unknown = await drover(['chains', 'default/nope', ...kernel]);
          t.deepEqual([unknown.code, unknown.stdout, unknown.stderr], [1, '', "drover: no rules for service default/nope in the kernel's KUBE-SERVICES chains\n"]);

          const clean = await drover(['diff', ...source, ...kernel]);
          t.deepEqual([clean.code, clean.stdout, clean.stderr], [0, 'no differences\n', '']);

          await run(`iptables-${variant}-restore`, ['--noflush'], { netns, input: HAND_EDIT });
          const drift = await drover(['diff', ...source, ...kernel]);
          t.is(drift.stderr, '');
          t.is(
            drift.stdout,
            `missing chain nat KUBE-SVC-4O55WZA47FGSYY6T (default/linkding:http)
extra rule nat KUBE-SERVICES: -d 10.96.0.99/32 -p tcp -m tcp --dport 81 -j KUBE-MARK-MASQ
missing rule nat KUBE-SERVICES: -d 10.96.0.80/32 -p tcp -m comment --comment "default/linkding:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-4O55WZA47FGSYY6T
`,
          );
          t.is(drift.code, 1);

          await sync();
          const repaired = await drover(['diff', ...source, ...kernel]);
          t.deepEqual([repaired.code, repaired.stdout], [0, 'no differences\n']);
          t.is((await drover(['chains', 'default/linkding', ...kernel])).stdout, LINKDING);
        });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
}

test('diff exits 2 when it cannot compare: a missing source, a bad flag', async (t) => {
  const missing = await drover(['diff', '--source', '/nonexistent/drover']);
  t.deepEqual([missing.code, missing.stdout, missing.stderr], [2, '', 'drover: manifest path not found: /nonexistent/drover\n']);
  const flag = await drover(['diff', '--source', 'examples', '--cluster-cidr', '10.0.0.0/33']);
  t.is(flag.code, 2);
  t.regex(flag.stderr, /^drover: .*10\.0\.0\.0\/33.*not a valid IPv4 CIDR/);
});
