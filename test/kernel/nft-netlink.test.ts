/**
 * The nf_tables netlink client against the real kernel, in a fresh network
 * namespace per test. A netlink socket acts on the namespace of the process
 * that opened it, so the client runs in a child process inside the
 * namespace (test/support/nft-netlink-ops.ts under `ip netns exec`); the
 * sets are created, and read back, with /usr/sbin/nft there too.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ConcatField } from '../../src/kernel/nftables/concat.ts';
import { run } from '../../src/kernel/exec.ts';
import { withNetns } from '../../src/testbed/netns.ts';
import { testbedUnavailableReason } from '../../src/testbed/topology.ts';
import type { Op, OpElement, OpResult } from '../support/nft-netlink-ops.ts';
import { moduleArgv } from '../../src/util/node-module.ts';

const NFT = '/usr/sbin/nft';
/** node and test/support/nft-netlink-ops as this test runs: compiled, or the .ts through tsx. */
const [NODE, ...SCRIPT] = moduleArgv(import.meta.url, '../support/nft-netlink-ops');
const SETUP = fileURLToPath(new URL('../fixtures/nftables/setup.nft', import.meta.url));

const unavailable = (await testbedUnavailableReason()) ?? (existsSync(NFT) ? undefined : `${NFT} is not installed`);

/** Run the client's `ops` inside `netns`; one result per op. */
async function client(netns: string, ops: Op[]): Promise<OpResult[]> {
  const r = await run(NODE!, SCRIPT, { netns, input: JSON.stringify(ops), timeoutMs: 60_000 });
  return JSON.parse(r.stdout) as OpResult[];
}

/** The value of a successful op; fails the test with the error otherwise. */
function value<T>(r: OpResult | undefined): T {
  if (!r?.ok) throw new Error(`op failed: ${JSON.stringify(r)}`);
  return r.value as T;
}

const PROTO_NAMES: Record<number, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };

/** A concatenation as nft -j prints its parts: "10.96.0.10 . tcp . 80". */
function text(fields: readonly ConcatField[]): string {
  return fields
    .map((f) => {
      if ('proto' in f) return PROTO_NAMES[f.proto] ?? String(f.proto);
      return String(Object.values(f)[0]);
    })
    .join(' . ');
}

/** An element as "KEY" (set) or "KEY : DATA" (map). */
function elementText(e: { key: readonly ConcatField[]; data?: readonly ConcatField[] }): string {
  return e.data ? `${text(e.key)} : ${text(e.data)}` : text(e.key);
}

type NftJsonValue = string | number | { concat: (string | number)[] };

/** The elements of a set (`kind` "set") or map ("map") as nft -j lists them, in element text, sorted. */
async function nftElements(netns: string, kind: 'set' | 'map', name: string): Promise<string[]> {
  const out = JSON.parse((await run(NFT, ['-j', 'list', kind, 'ip', 'drover', name], { netns })).stdout) as { nftables: Record<string, { elem?: unknown[] }>[] };
  const obj = out.nftables.find((x) => kind in x)?.[kind];
  const part = (v: NftJsonValue): string => (typeof v === 'object' ? v.concat.join(' . ') : String(v));
  return (obj?.elem ?? [])
    .map((e) => (Array.isArray(e) ? `${part(e[0] as NftJsonValue)} : ${part(e[1] as NftJsonValue)}` : part(e as NftJsonValue)))
    .sort();
}

const ref = (set: string) => ({ family: 'ip' as const, table: 'drover', set });

const svcKey = (ip: string, proto: number, port: number): ConcatField[] => [{ ipv4: ip }, { proto }, { port }];
const SVC: OpElement[] = [{ key: svcKey('10.96.0.10', 6, 80) }, { key: svcKey('10.96.0.53', 17, 53) }];
const BK: OpElement[] = [
  { key: [...svcKey('10.96.0.10', 6, 80), { u32: 0 }], data: [{ ipv4: '10.244.1.2' }, { port: 8080 }] },
  { key: [...svcKey('10.96.0.53', 17, 53), { u32: 0 }], data: [{ ipv4: '10.244.1.3' }, { port: 53 }] },
];
const LIST_SVC: Op = { op: 'list', ...ref('svc'), keyKinds: ['ipv4', 'proto', 'port'] };
const LIST_BK: Op = { op: 'list', ...ref('bk'), keyKinds: ['ipv4', 'proto', 'port', 'u32'], dataKinds: ['ipv4', 'port'] };

if (unavailable) {
  test.skip(`nf_tables netlink kernel tests skipped: ${unavailable}`, () => {});
} else {
  test.serial('elements added and deleted through the client are exactly those nft lists, and the client lists them back', async (t) => {
    await withNetns(async (netns) => {
      await run(NFT, ['-f', SETUP], { netns });
      const [gen0, added, gen1] = await client(netns, [
        { op: 'generation' },
        {
          op: 'commit',
          changes: [
            { op: 'add', ...ref('svc'), elements: SVC },
            { op: 'add', ...ref('bk'), elements: BK },
          ],
        },
        { op: 'generation' },
      ]);
      t.like(value<object>(added), { messages: 2, elements: 4 });
      t.true(value<number>(gen1) > value<number>(gen0), 'the generation increases with a commit');
      t.deepEqual(await nftElements(netns, 'set', 'svc'), ['10.96.0.10 . tcp . 80', '10.96.0.53 . udp . 53']);
      t.deepEqual(await nftElements(netns, 'map', 'bk'), ['10.96.0.10 . tcp . 80 . 0 : 10.244.1.2 . 8080', '10.96.0.53 . udp . 53 . 0 : 10.244.1.3 . 53']);

      const [deleted, svc, bk, gen2] = await client(netns, [
        {
          op: 'commit',
          changes: [
            { op: 'delete', ...ref('svc'), elements: [SVC[1]!] },
            { op: 'delete', ...ref('bk'), elements: [{ key: BK[1]!.key }] },
          ],
        },
        LIST_SVC,
        LIST_BK,
        { op: 'generation' },
      ]);
      t.like(value<object>(deleted), { messages: 2, elements: 2 });
      t.true(value<number>(gen2) > value<number>(gen1));
      const nftSvc = await nftElements(netns, 'set', 'svc');
      const nftBk = await nftElements(netns, 'map', 'bk');
      t.deepEqual(nftSvc, ['10.96.0.10 . tcp . 80']);
      t.deepEqual(nftBk, ['10.96.0.10 . tcp . 80 . 0 : 10.244.1.2 . 8080']);
      t.deepEqual(value<OpElement[]>(svc).map(elementText).sort(), nftSvc, 'the client lists what nft lists');
      t.deepEqual(value<OpElement[]>(bk).map(elementText).sort(), nftBk);
    });
  });

  test.serial('an add whose key is there with other data rejects naming the set and EEXIST, and the batch leaves every set unchanged', async (t) => {
    await withNetns(async (netns) => {
      await run(NFT, ['-f', SETUP], { netns });
      await client(netns, [{ op: 'commit', changes: [{ op: 'add', ...ref('bk'), elements: [BK[0]!] }] }]);
      const before = { svc: await nftElements(netns, 'set', 'svc'), bk: await nftElements(netns, 'map', 'bk') };
      const [gen0, clash, gen1, again] = await client(netns, [
        { op: 'generation' },
        {
          op: 'commit',
          changes: [
            { op: 'add', ...ref('svc'), elements: SVC },
            { op: 'add', ...ref('bk'), elements: [BK[1]!, { key: BK[0]!.key, data: [{ ipv4: '10.244.9.9' }, { port: 9 }] }] },
          ],
        },
        { op: 'generation' },
        // The same key with the same data is no conflict (NLM_F_CREATE without NLM_F_EXCL).
        { op: 'commit', changes: [{ op: 'add', ...ref('bk'), elements: [BK[0]!] }] },
      ]);
      t.false(clash?.ok);
      if (clash && !clash.ok) {
        t.is(clash.error.name, 'NftRequestError');
        t.is(clash.error.code, 'EEXIST');
        t.is(clash.error.errno, 17);
        t.is(clash.error.op, 'add');
        t.is(clash.error.set, 'bk');
        t.regex(clash.error.message, /add .* set ip drover bk .*EEXIST/);
      }
      t.is(value(gen1), value(gen0), 'nothing was committed');
      t.deepEqual({ svc: await nftElements(netns, 'set', 'svc'), bk: await nftElements(netns, 'map', 'bk') }, before, 'the sets are unchanged, svc included');
      t.like(value<object>(again), { messages: 1, elements: 1 });
    });
  });

  test.serial('a delete of a missing element, a missing set and a list of a missing set reject with ENOENT naming the set; of two failures the first is reported', async (t) => {
    await withNetns(async (netns) => {
      await run(NFT, ['-f', SETUP], { netns });
      const results = await client(netns, [
        { op: 'commit', changes: [{ op: 'delete', ...ref('svc'), elements: [SVC[0]!] }] },
        { op: 'commit', changes: [{ op: 'add', ...ref('nope'), elements: [SVC[0]!] }] },
        { ...LIST_SVC, set: 'nope' },
        LIST_SVC,
        // Two failing messages: the kernel answers both, the first one is reported.
        {
          op: 'commit',
          changes: [
            { op: 'add', ...ref('svc'), elements: [SVC[1]!] },
            { op: 'delete', ...ref('bk'), elements: [{ key: BK[0]!.key }] },
            { op: 'add', ...ref('nope'), elements: [SVC[0]!] },
          ],
        },
        LIST_SVC,
      ]);
      for (const [i, op] of (['delete', 'add', 'list'] as const).entries()) {
        const r = results[i];
        t.false(r?.ok, op);
        if (r && !r.ok) {
          t.is(r.error.code, 'ENOENT', op);
          t.is(r.error.op, op);
          t.is(r.error.set, i === 0 ? 'svc' : 'nope');
        }
      }
      t.deepEqual(value(results[3]), [], 'an empty set lists as no elements');
      const first = results[4];
      t.false(first?.ok);
      if (first && !first.ok) t.deepEqual([first.error.op, first.error.set, first.error.code], ['delete', 'bk', 'ENOENT']);
      t.deepEqual(value(results[5]), [], 'the add to svc in that batch was not applied');
    });
  });

  test.serial('a batch of thousands of elements, split over many messages, is applied whole and listed back whole', async (t) => {
    await withNetns(async (netns) => {
      await run(NFT, ['-f', SETUP], { netns });
      const elements: OpElement[] = Array.from({ length: 6000 }, (_, i) => ({
        key: [...svcKey(`10.96.${i >> 8}.${i & 255}`, 6, 80), { u32: 0 }],
        data: [{ ipv4: `10.244.${i >> 8}.${i & 255}` }, { port: 8080 }],
      }));
      const [added, listed] = await client(netns, [{ op: 'commit', changes: [{ op: 'add', ...ref('bk'), elements }] }, LIST_BK]);
      const r = value<{ messages: number; elements: number }>(added);
      t.true(r.messages > 1, `${r.messages} messages`);
      t.is(r.elements, 6000);
      const want = elements.map(elementText).sort();
      t.deepEqual(value<OpElement[]>(listed).map(elementText).sort(), want);
      t.deepEqual(await nftElements(netns, 'map', 'bk'), want);
    });
  });
}
