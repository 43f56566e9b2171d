/**
 * IPVS mode's ipsets against the real kernel's ip_set (which this host has,
 * unlike ip_vs), in a fresh network namespace per test: the plan a sync
 * writes, read back with `ipset save`, while an iptables rule references the
 * set the way IPVS mode's KUBE-SERVICES rule does.
 */
import test from 'ava';
import { SystemIptables } from '../../src/kernel/iptables/exec.ts';
import { CLUSTER_IP_SET, IPVS_SETS, LOOP_BACK_SET, SystemIpset, parseIpsetSave, planIpsetDestroy, planIpsetRestore } from '../../src/modes/ipvs/ipset.ts';
import { run } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';

const unavailable = await testbedUnavailableReason();

/** The entries of `set`, sorted, as `ipset save` lists them in `netns`. */
async function entries(netns: string, set: string): Promise<string[]> {
  const out = (await run('ipset', ['save', set], { netns })).stdout;
  return out
    .split('\n')
    .filter((l) => l.startsWith(`add ${set} `))
    .map((l) => l.slice(`add ${set} `.length))
    .sort();
}

/** `ipset list -n` once the plan is applied: every set of IPVS mode, in the order the plan creates them, and no scratch set. */
const ALL_SETS = IPVS_SETS.map((x) => `${x.name}\n`).join('');

const WANT = {
  [CLUSTER_IP_SET]: ['10.96.0.10,tcp:80', '10.96.0.53,udp:53'],
  [LOOP_BACK_SET]: ['10.244.1.2,tcp:8080,10.244.1.2'],
};

if (unavailable) {
  test.skip(`ipset kernel tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('a set with entries added by hand, one drover never writes, is brought to the desired entries while a rule references it', async (t) => {
    await withNetns(async (netns) => {
      const ipset = new SystemIpset(30_000, netns);
      await ipset.restore(planIpsetRestore(WANT, parseIpsetSave(await ipset.save())).input);
      // The rule keeps a reference to the set, as IPVS mode's nat rules do: a destroy of it would fail.
      await new SystemIptables({ variant: 'nft', netns }).restore(
        `*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -m set --match-set ${CLUSTER_IP_SET} dst,dst -j ACCEPT\nCOMMIT\n`,
      );
      await run('ipset', ['add', CLUSTER_IP_SET, '10.96.0.10,icmp:echo-request'], { netns });
      await run('ipset', ['add', CLUSTER_IP_SET, '10.96.0.99,tcp:80'], { netns });
      await run('ipset', ['del', LOOP_BACK_SET, '10.244.1.2,tcp:8080,10.244.1.2'], { netns });

      const plan = planIpsetRestore(WANT, parseIpsetSave(await ipset.save()));
      t.deepEqual(plan.rebuilt, [CLUSTER_IP_SET]);
      await ipset.restore(plan.input);

      t.deepEqual(await entries(netns, CLUSTER_IP_SET), WANT[CLUSTER_IP_SET]);
      t.deepEqual(await entries(netns, LOOP_BACK_SET), WANT[LOOP_BACK_SET]);
      t.is((await run('ipset', ['list', '-n'], { netns })).stdout, ALL_SETS, 'no scratch set is left');
      const rule = (await run('iptables-nft-save', ['-t', 'nat'], { netns })).stdout;
      t.regex(rule, new RegExp(`^-A KUBE-SERVICES -m set --match-set ${CLUSTER_IP_SET} dst,dst -j ACCEPT$`, 'm'), 'the rule still matches the set by its name');
      t.is(planIpsetRestore(WANT, parseIpsetSave(await ipset.save())).input, '', 'the read-back equals the desired state');
    });
  });

  test.serial('a scratch set left over by an interrupted rebuild is destroyed by the next plan and by cleanup', async (t) => {
    await withNetns(async (netns) => {
      const ipset = new SystemIpset(30_000, netns);
      await ipset.restore(planIpsetRestore(WANT, new Map()).input);
      await run('ipset', ['create', `${LOOP_BACK_SET}-SWAP`, 'hash:ip,port,ip', 'family', 'inet'], { netns });
      await ipset.restore(planIpsetRestore(WANT, parseIpsetSave(await ipset.save())).input);
      t.is((await run('ipset', ['list', '-n'], { netns })).stdout, ALL_SETS);

      await run('ipset', ['create', `${CLUSTER_IP_SET}-SWAP`, 'hash:ip,port', 'family', 'inet'], { netns });
      await ipset.restore(planIpsetDestroy(parseIpsetSave(await ipset.save())));
      t.is((await run('ipset', ['list', '-n'], { netns })).stdout, '');
    });
  });
}
