/**
 * The drop of conntrack-INVALID forwarded packets in every mode, as
 * `drover render` prints it, and its absence with
 * `--conntrack-tcp-be-liberal` (kube-proxy's conntrack.tcpBeLiberal).
 */
import test from 'ava';
import { modeDriver } from '../../src/modes/registry.ts';
import { dualSnap, ep, sp } from '../support/snapshots.ts';

const SNAPSHOT = dualSnap([sp('default/web:http', '10.96.0.10', 80, [ep('10.244.1.2:8080')])], [sp('default/web:http', 'fd00:96::10', 80, [ep('[fd00:244:1::2]:8080')])]);

/** What `drover render --mode MODE` prints, with or without --conntrack-tcp-be-liberal. */
async function rendered(mode: string, liberal: boolean): Promise<string> {
  const opts = { source: 'unused', masqueradeAll: false, serviceCidr: '10.96.0.0/12', clusterCidr: '10.244.0.0/16,fd00:244::/48', ...(liberal ? { conntrackTcpBeLiberal: true } : {}) };
  return (await modeDriver(mode).render(SNAPSHOT, { render: opts, modes: {} }, [])).text;
}

/** The KUBE-FORWARD rules of the output, in order (both families' rulesets). */
const forwardRules = (text: string) => text.split('\n').filter((l) => l.startsWith('-A KUBE-FORWARD '));

const ACCEPTS = [
  '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
  '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
];
const DROP = '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP';

for (const mode of ['iptables', 'ipvs']) {
  test(`${mode} mode: KUBE-FORWARD starts with the INVALID drop in both families, as kube-proxy writes it; none with --conntrack-tcp-be-liberal`, async (t) => {
    t.deepEqual(forwardRules(await rendered(mode, false)), [DROP, ...ACCEPTS, DROP, ...ACCEPTS]);
    t.deepEqual(forwardRules(await rendered(mode, true)), [...ACCEPTS, ...ACCEPTS]);
  });
}

test('nftables mode: chain filter-forward of both tables drops ct state invalid first; not with --conntrack-tcp-be-liberal', async (t) => {
  /** The body of each `chain filter-forward { … }` of the script. */
  const forward = (text: string) => [...text.matchAll(/chain filter-forward \{\n([^}]*)\}/g)].map((m) => m[1]!.split('\n').map((l) => l.trim()).filter((l) => l !== ''));
  const base = 'type filter hook forward priority -110; policy accept;';
  const check = 'ct state new jump endpoints-check comment "frontends without endpoints"';
  const drop = 'ct state invalid drop comment "conntrack INVALID packets, which keep their DNAT undone"';
  t.deepEqual(forward(await rendered('nftables', false)), [
    [base, drop, check],
    [base, drop, check],
  ]);
  t.deepEqual(forward(await rendered('nftables', true)), [
    [base, check],
    [base, check],
  ]);
});
