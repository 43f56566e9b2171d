/**
 * Runs nf_tables netlink client calls given as JSON on stdin and prints
 * their results as JSON on stdout, so that a test can run the client in
 * another network namespace (a netlink socket acts on the namespace of the
 * process that opens it):
 *
 *     ip netns exec NS node --import tsx test/support/nft-netlink-ops.ts < ops.json
 *
 * Input: an array of {@link Op}. Output: one {@link OpResult} per op, in
 * order (a failing op does not stop the others). Exit code 0 unless the
 * input itself is unreadable or the socket cannot be opened.
 */
import { decodeConcat, encodeConcat, type ConcatField, type FieldKind } from '../../src/kernel/nftables/concat.ts';
import { NftNetlinkClient, NftRequestError } from '../../src/kernel/nftables/client.ts';
import type { NftFamily, SetElementChange } from '../../src/kernel/nftables/codec.ts';

/** An element with its key (and data) as concatenation fields. */
export interface OpElement {
  readonly key: ConcatField[];
  readonly data?: ConcatField[];
}

/** One call. */
export type Op =
  | { readonly op: 'commit'; readonly changes: readonly (Omit<SetElementChange, 'elements'> & { readonly elements: readonly OpElement[] })[] }
  | { readonly op: 'list'; readonly family: NftFamily; readonly table: string; readonly set: string; readonly keyKinds: FieldKind[]; readonly dataKinds?: FieldKind[] }
  | { readonly op: 'generation' };

/** The result of one call: `value` (commit: {messages, elements}; list: elements; generation: the id) or `error`. */
export type OpResult =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: { name: string; message: string; code?: string; errno?: number; op?: string; set?: string } };

async function main(): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const ops = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Op[];
  const client = await NftNetlinkClient.open({ timeoutMs: 5000 });
  const results: OpResult[] = [];
  try {
    for (const op of ops) {
      try {
        results.push({ ok: true, value: await runOp(client, op) });
      } catch (err) {
        const e = err as Error;
        results.push({
          ok: false,
          error: {
            name: e.name,
            message: e.message,
            ...(e instanceof NftRequestError ? { code: e.code, errno: e.errno, op: e.op, ...(e.target ? { set: e.target.set } : {}) } : {}),
          },
        });
      }
    }
  } finally {
    client.close();
  }
  process.stdout.write(`${JSON.stringify(results)}\n`);
}

async function runOp(client: NftNetlinkClient, op: Op): Promise<unknown> {
  switch (op.op) {
    case 'commit':
      return client.commit(
        op.changes.map((c) => ({
          ...c,
          elements: c.elements.map((e, i) => ({
            key: encodeConcat(e.key, `elements[${i}].key`),
            ...(e.data ? { data: encodeConcat(e.data, `elements[${i}].data`) } : {}),
          })),
        })),
      );
    case 'list': {
      const elements = await client.listElements(op.family, op.table, op.set);
      return elements.map((e) => ({
        key: decodeConcat(e.key, op.keyKinds),
        ...(e.data && op.dataKinds ? { data: decodeConcat(e.data, op.dataKinds) } : {}),
      }));
    }
    case 'generation':
      return client.generation();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
