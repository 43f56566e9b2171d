/**
 * The iptables backend against the real kernel, in a fresh network namespace
 * per test, for both iptables-nft and iptables-legacy. State is read back
 * with iptables-save (and `nft -a` rule handles, which change when a rule is
 * rewritten).
 */
import test from 'ava';
import { IptablesBackend } from '../../src/modes/iptables/backend.ts';
import { canonicalRule } from '../../src/kernel/iptables/canonical.ts';
import { SystemIptables, type IptablesExec, type IptablesVariant } from '../../src/kernel/iptables/exec.ts';
import { parseSave } from '../../src/kernel/iptables/parse.ts';
import { renderRestore } from '../../src/modes/iptables/snapshot.ts';
import { run } from '../../src/kernel/exec.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import { silentLogger } from '../../src/util/log.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { ep, snap, sp } from '../support/snapshots.ts';

const unavailable = await testbedUnavailableReason();
const render = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };
const FULL = { full: true, changed: new Set<string>() };

/** Records every payload, so tests can see what a sync wrote. */
class Recording implements IptablesExec {
  readonly payloads: string[] = [];
  constructor(private readonly inner: SystemIptables) {}
  get variant() {
    return this.inner.variant;
  }
  restore(input: string) {
    this.payloads.push(input);
    return this.inner.restore(input);
  }
  save(table: 'nat' | 'filter') {
    return this.inner.save(table);
  }
  chainExists(table: 'mangle' | 'nat' | 'filter', chain: string) {
    return this.inner.chainExists(table, chain);
  }
  ensureChain(table: 'mangle' | 'nat' | 'filter', chain: string) {
    return this.inner.ensureChain(table, chain);
  }
  listChain(table: 'mangle' | 'nat' | 'filter', chain: string) {
    return this.inner.listChain(table, chain);
  }
  deleteChain(table: 'mangle' | 'nat' | 'filter', chain: string) {
    return this.inner.deleteChain(table, chain);
  }
}

const web = (eps: string[]) =>
  sp('default/web:http', '10.96.0.10', 80, eps.map((e) => ep(e)), { sessionAffinity: null });
const api = (eps: string[]) => sp('default/api:grpc', '10.96.0.11', 9000, eps.map((e) => ep(e)), { protocol: 'UDP' });
const eps10 = Array.from({ length: 10 }, (_, i) => `10.244.1.${i + 2}:8080`);

/** Rules (without comments/counters) of drover-relevant lines in an iptables-save text. */
function lines(save: string): string[] {
  return save.split('\n').filter((l) => l.startsWith('-A ') || (l.startsWith(':') && !/^:[A-Z]+ (ACCEPT|DROP)/.test(l)));
}

async function nftHandles(netns: string): Promise<Map<string, string>> {
  // rule text (with chain) → handle, from nft's own view of the iptables-nft tables. nft by its path:
  // under npm, PATH starts with node_modules/.bin, which may hold an unrelated `nft`.
  const out = (await run('/usr/sbin/nft', ['-a', 'list', 'table', 'ip', 'nat'], { netns })).stdout;
  const handles = new Map<string, string>();
  let chain = '';
  for (const line of out.split('\n')) {
    const c = /^\s*chain (\S+) \{/.exec(line);
    if (c) chain = c[1]!;
    const h = /^\s*(.*) # handle (\d+)$/.exec(line);
    if (h && chain) handles.set(`${chain} ${h[1]}`, h[2]!);
  }
  if (handles.size === 0) throw new Error(`nft -a listed no rule with a handle: ${out}`);
  return handles;
}

const variants: IptablesVariant[] = ['nft', 'legacy'];

if (unavailable) {
  test.skip(`iptables kernel tests skipped: ${unavailable}`, () => {});
} else {
  for (const variant of variants) {
    const setup = (netns: string) => {
      const exec = new Recording(new SystemIptables({ variant, netns }));
      const make = () => new IptablesBackend({ exec, render, logger: silentLogger() });
      return { exec, backend: make(), make };
    };

    test.serial(`${variant}: the kernel holds exactly the rendered rules`, async (t) => {
      await withNetns(async (netns) => {
        const { exec, backend } = setup(netns);
        const s = snap(web(eps10), api([]), sp('default/db', '10.96.0.12', 5432, [ep('10.244.3.2:5432')], { sessionAffinity: { timeoutSeconds: 300 } }));
        await backend.sync(s, FULL);
        const kernel = parseSave(`${await exec.save('filter')}\n${await exec.save('nat')}`);
        const rendered = parseSave(renderRestore(s, render).replace(/^-I (\S+) 1 /gm, '-A $1 '));
        for (const table of ['filter', 'nat']) {
          for (const [chain, parsed] of rendered.get(table)!) {
            const have = kernel.get(table)?.get(chain)?.rules ?? [];
            const want = parsed.rules.map(canonicalRule);
            t.deepEqual(have.filter((r) => want.includes(r)).length, want.length, `${table} ${chain} has every rule`);
            if (!['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'].includes(chain)) {
              t.deepEqual(have, want, `${table} ${chain} reads back exactly`);
            }
          }
        }
        t.regex(await exec.save('nat'), /--probability 0\.10000000009 -j KUBE-SEP-/);
        // A second full sync finds nothing to do.
        t.like(await backend.sync(s, FULL), { written: { chain: 0, rule: 0 }, transactions: 0 });
      });
    });

    test.serial(`${variant}: an update rewrites only what changed and stale chains are gone`, async (t) => {
      await withNetns(async (netns) => {
        const { exec, backend } = setup(netns);
        await backend.sync(snap(web(['10.244.1.2:8080', '10.244.1.3:8080']), api(['10.244.2.2:9000'])), FULL);
        const before = lines(await exec.save('nat'));
        const handlesBefore = variant === 'nft' ? await nftHandles(netns) : undefined;
        await backend.sync(snap(web(['10.244.1.2:8080']), api(['10.244.2.2:9000'])), {
          full: false,
          changed: new Set(['default/web:http']),
        });
        const payload = exec.payloads.at(-1)!;
        t.false(payload.includes('default/api'), 'the unchanged service is not in the payload');
        t.false(payload.includes('*filter'), 'filter is not touched');
        const after = lines(await exec.save('nat'));
        const removed = before.filter((l) => !after.includes(l));
        const added = after.filter((l) => !before.includes(l));
        const staleSep = /KUBE-SEP-\w+/.exec(before.find((l) => l.includes('--to-destination 10.244.1.3:8080'))!)![0];
        t.deepEqual(removed.sort(), [
          `-A ${staleSep} -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.3:8080`,
          `-A ${staleSep} -s 10.244.1.3/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`,
          ...before.filter((l) => l.includes('-m comment --comment "default/web:http -> ')),
          `:${staleSep} - [0:0]`,
        ].sort());
        t.deepEqual(added, [before.find((l) => l.includes('"default/web:http -> 10.244.1.2:8080"'))!.replace(/ -m statistic .* -j/, ' -j')]);
        t.false(after.some((l) => l.includes('10.244.1.3')), 'the stale KUBE-SEP chain is gone');
        if (handlesBefore) {
          const handlesAfter = await nftHandles(netns);
          for (const [rule, handle] of handlesBefore) {
            if (rule.includes('default/api')) t.is(handlesAfter.get(rule), handle, `untouched: ${rule}`);
          }
        }
        // Removing the service deletes its chains and its jump.
        await backend.sync(snap(api(['10.244.2.2:9000'])), { full: false, changed: new Set(['default/web:http']) });
        const final = await exec.save('nat');
        t.false(final.includes('default/web'));
        t.is((final.match(/^:KUBE-S(VC|EP)-/gm) ?? []).length, 2);
      });
    });

    test.serial(`${variant}: a restarted drover does not flush or rewrite live rules`, async (t) => {
      await withNetns(async (netns) => {
        const { exec, backend, make } = setup(netns);
        const s = snap(web(eps10), api([]));
        await backend.sync(s, FULL);
        const saved = await exec.save('nat');
        const handles = variant === 'nft' ? await nftHandles(netns) : undefined;
        const writes = exec.payloads.length;
        const result = await make().sync(s, FULL);
        t.is(exec.payloads.length, writes, 'no restore ran');
        t.like(result, { full: true, transactions: 0 });
        t.deepEqual(lines(await exec.save('nat')), lines(saved));
        if (handles) t.deepEqual(await nftHandles(netns), handles, 'every rule keeps its nft handle');
      });
    });

    test.serial(`${variant}: cleanup leaves the tables as they were before`, async (t) => {
      await withNetns(async (netns) => {
        const { exec, backend } = setup(netns);
        // Someone else's rules: a Docker-like chain and hook.
        await exec.restore('*nat\n:DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-A DOCKER -i docker0 -j RETURN\nCOMMIT\n*filter\n-A FORWARD -o docker0 -j ACCEPT\nCOMMIT\n');
        const before = { nat: lines(await exec.save('nat')), filter: lines(await exec.save('filter')) };
        await backend.sync(snap(web(['10.244.1.2:8080']), api([])), FULL);
        t.not(lines(await exec.save('nat')).length, before.nat.length);
        t.deepEqual((await backend.cleanup()).kept, []);
        t.deepEqual({ nat: lines(await exec.save('nat')), filter: lines(await exec.save('filter')) }, before);
      });
    });

    test.serial(`${variant}: cleanup keeps, empty, a chain that a foreign rule jumps to and reports that rule`, async (t) => {
      await withNetns(async (netns) => {
        const { exec, backend } = setup(netns);
        await backend.sync(snap(web(['10.244.1.2:8080'])), FULL);
        await exec.restore('*nat\n-A PREROUTING -s 192.168.7.0/24 -j KUBE-MARK-MASQ\nCOMMIT\n');
        // 10 chains of the ruleset (KUBE-MARK-MASQ kept) and the 3 canary chains (mangle, nat, filter); 15 hook rules.
        t.deepEqual(await backend.cleanup(), {
          removed: { chain: 13, rule: 15 },
          kept: [{ table: 'nat', chain: 'KUBE-MARK-MASQ', referencedBy: ['-A PREROUTING -s 192.168.7.0/24 -j KUBE-MARK-MASQ'] }],
        });
        t.deepEqual(lines(await exec.save('nat')), [':KUBE-MARK-MASQ - [0:0]', '-A PREROUTING -s 192.168.7.0/24 -j KUBE-MARK-MASQ']);
        t.deepEqual(lines(await exec.save('filter')), []);
      });
    });

    test.serial(`${variant}: a full sync never flushes chains drover does not own`, async (t) => {
      await withNetns(async (netns) => {
        const { exec, backend } = setup(netns);
        await exec.restore('*nat\n:CNI-HOSTPORT - [0:0]\n-A CNI-HOSTPORT -p tcp --dport 8080 -j DNAT --to-destination 10.244.9.9:80\nCOMMIT\n');
        await backend.sync(snap(web(eps10)), FULL);
        await backend.sync(snap(), FULL);
        t.true((await exec.save('nat')).includes('-A CNI-HOSTPORT -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.244.9.9:80'));
      });
    });
  }
}
