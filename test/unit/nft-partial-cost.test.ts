/**
 * The cost of one partial sync in nftables mode does not grow with the
 * number of service ports, shown without a clock: with 100 and with 10,000
 * service ports in the table, one endpoint removed (and put back), one
 * service port added (and removed) each make drover look at exactly as many
 * Map and Set entries (every entry a Map or Set iteration yields is
 * counted, in planning, encoding and bookkeeping alike), send exactly the
 * same element operations, encoded as the same netlink batch, and neither
 * read the table back nor run nft. What the in-memory kernel (fake.ts)
 * does with a batch is not counted: it copies its whole table per
 * transaction.
 *
 * Map and Set iteration is counted by wrapping their prototypes' iteration
 * methods while a sync runs (this file runs in a process of its own).
 */
import test from 'ava';
import { NftablesBackend, type ElementWriter } from '../../src/modes/nftables/backend.ts';
import { FakeNft } from '../../src/modes/nftables/fake.ts';
import type { ElementOp } from '../../src/modes/nftables/model.ts';
import { batchBytes, NetlinkElementWriter } from '../../src/modes/nftables/netlink-writer.ts';
import type { SetElementChange } from '../../src/kernel/nftables/codec.ts';
import { countServingEndpoints } from '../../src/model/policy.ts';
import type { ServicePort, Snapshot } from '../../src/model/types.ts';
import { synthServicePort, synthSnapshot, withServicePort } from '../../src/bench/synth.ts';
import { silentLogger } from '../../src/util/log.ts';

const RENDER = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };

/** Entries yielded by Map and Set iteration while counting is on (and not paused). */
const seen = { entries: 0, on: false };

/** Wrap the iteration methods of Map and Set so that every entry they yield is counted; once per process. */
function countIteration(): void {
  for (const proto of [Map.prototype, Set.prototype] as unknown as Record<PropertyKey, unknown>[]) {
    for (const name of [Symbol.iterator, 'entries', 'keys', 'values'] as const) {
      const inner = proto[name] as (this: unknown) => Iterator<unknown>;
      proto[name] = function (this: unknown) {
        const it = inner.call(this);
        return {
          next() {
            const r = it.next();
            if (!r.done && seen.on) seen.entries++;
            return r;
          },
          [Symbol.iterator]() {
            return this;
          },
        };
      };
    }
    const forEach = proto.forEach as (this: unknown, fn: (...a: unknown[]) => void, self?: unknown) => void;
    proto.forEach = function (this: unknown, fn: (...a: unknown[]) => void, self?: unknown) {
      forEach.call(this, (...a: unknown[]) => {
        if (seen.on) seen.entries++;
        fn.apply(self, a);
      });
    };
  }
}

/** Run `f` with counting off (the in-memory kernel's own work). */
async function uncounted<T>(f: () => Promise<T> | T): Promise<T> {
  const was = seen.on;
  seen.on = false;
  try {
    return await f();
  } finally {
    seen.on = was;
  }
}

/** What one partial sync did. */
interface Cost {
  /** Map and Set entries drover's code iterated. */
  readonly entries: number;
  /** Element operations handed to the writer. */
  readonly ops: ElementOp[][];
  /** The netlink batches encoded from them. */
  readonly batches: SetElementChange[][];
  /** nft scripts run and table listings made. */
  readonly nftCalls: number;
  /** The sync result's endpoint count, and the count of the whole snapshot. */
  readonly endpoints: readonly [number, number];
}

/** A backend over the in-memory kernel with the netlink writer (encoding counted, the fake's commit not), full-synced to `base`. */
async function syncedBackend(base: Snapshot) {
  const fake = new FakeNft();
  const ops: ElementOp[][] = [];
  const batches: SetElementChange[][] = [];
  const netlink = new NetlinkElementWriter({ commit: async (c) => (batches.push([...c]), { messages: c.length, elements: 0, bytes: batchBytes(c) }) });
  const kernel = fake.writer();
  const writer: ElementWriter = {
    accepts: (o) => netlink.accepts(o),
    commit: async (o) => {
      ops.push([...o]);
      const bytes = await netlink.commit(o);
      await uncounted(() => kernel.commit(o));
      return bytes;
    },
    generation: () => uncounted(() => kernel.generation!()),
  };
  let nftCalls = 0;
  const nft = new Proxy(fake, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (seen.on) nftCalls++;
        return uncounted(() => (v as (...a: unknown[]) => unknown).apply(target, args));
      };
    },
  });
  const backend = new NftablesBackend({ nft, elements: writer, render: RENDER, frontends: { nodePortIPs: [] }, logger: silentLogger() });
  await backend.sync(base, { full: true, changed: new Set() });
  /** One partial sync to `to` of the service port `key`, counted. */
  const partial = async (to: Snapshot, key: string): Promise<Cost> => {
    ops.length = 0;
    batches.length = 0;
    nftCalls = 0;
    seen.entries = 0;
    seen.on = true;
    let r;
    try {
      r = await backend.sync(to, { full: false, changed: new Set([key]) });
    } finally {
      seen.on = false;
    }
    return { entries: seen.entries, ops: [...ops], batches: [...batches], nftCalls, endpoints: [r.endpoints, countServingEndpoints(to)] };
  };
  return { partial };
}

/** Synthetic service port `i` with `count` endpoints 10.`net`.0.1, .2, …, which no other service port has (their hairpin entries are its own). */
function own(i: number, count: number, net: number): ServicePort {
  const sp = synthServicePort(i, count);
  return { ...sp, endpoints: sp.endpoints.map((e, j) => ({ ...e, ip: `10.${net}.0.${j + 1}` })) };
}

/**
 * The bench's four changes, each partial sync's cost, at `n` service ports
 * (10 endpoints each): service port `web` (10 endpoints) loses one and gets
 * it back; `added` (3 endpoints) comes and goes. Two more service ports hold
 * 9 and 3 endpoints, so that no change needs a new endpoint-count set (a
 * structural change, once per count).
 */
async function costs(n: number): Promise<Cost[]> {
  const web = own(70_000, 10, 250);
  const added = own(70_002, 3, 252);
  let base = synthSnapshot(n, 10);
  for (const sp of [web, own(70_001, 9, 251), own(70_003, 3, 253)]) base = withServicePort(base, sp.key, sp);
  const reduced = withServicePort(base, web.key, { ...web, endpoints: web.endpoints.slice(1) });
  const grown = withServicePort(base, added.key, added);
  const b = await syncedBackend(base);
  return [await b.partial(reduced, web.key), await b.partial(base, web.key), await b.partial(grown, added.key), await b.partial(base, added.key)];
}

countIteration();

test('one partial sync with 10,000 service ports iterates, writes and encodes exactly what it does with 100, and reads nothing back', async (t) => {
  const small = await costs(100);
  const large = await costs(10_000);
  const names = ['endpoint removed', 'endpoint added', 'service added', 'service removed'];
  for (const [i, name] of names.entries()) {
    const [s, l] = [small[i]!, large[i]!];
    t.is(l.entries, s.entries, `${name}: Map/Set entries iterated`);
    t.deepEqual(l.ops, s.ops, `${name}: element operations`);
    t.deepEqual(l.batches, s.batches, `${name}: netlink batch`);
    t.is(l.nftCalls, 0, `${name}: no nft call (no read-back, no script)`);
    t.is(l.endpoints[0], l.endpoints[1], `${name}: endpoint count of the result`);
    // A change of one service port looks at a few dozen entries: its frontends, its endpoints, the table's sets.
    t.true(l.entries < 200, `${name}: ${l.entries} entries iterated`);
    t.log(`${name}: ${l.entries} Map/Set entries iterated, ${l.ops.flat().length} element operations`);
  }
  // What one endpoint removed writes: its slot, which the endpoint of the last slot moves into, its endpoint count and its hairpin entry.
  t.deepEqual(large[0]!.ops, [
    [
      { op: 'delete', set: 'endpoint-count-10', key: '10.97.17.122 . tcp . 80' },
      { op: 'delete', set: 'endpoints', key: '10.97.17.122 . tcp . 80 . 0' },
      { op: 'delete', set: 'endpoints', key: '10.97.17.122 . tcp . 80 . 9' },
      { op: 'delete', set: 'hairpin', key: '10.250.0.1 . 10.250.0.1 . tcp . 8080' },
      { op: 'add', set: 'endpoint-count-9', key: '10.97.17.122 . tcp . 80' },
      { op: 'add', set: 'endpoints', key: '10.97.17.122 . tcp . 80 . 0', value: '10.250.0.9 . 8080' },
    ],
  ]);
});
