/**
 * Writes the table and chains of test/fixtures/nftables/objects.nft with
 * drover's own NEWTABLE and NEWCHAIN messages (kernel/nftables/object-codec.ts),
 * as one nf_tables batch, inside the network namespace this process was
 * started in (a netlink socket acts on the namespace of its process):
 *
 *     ip netns exec NS node --import tsx test/support/nft-objects-write.ts
 *
 * Prints the errno of each message's answer as JSON (0: ACK), in order.
 */
import { decodeAck, message, nextSeq, parseMessages } from '../../src/kernel/nftables/codec.ts';
import { NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END, NFNL_SUBSYS_NFTABLES, NFPROTO, NLMSG_ERROR, NLM_F } from '../../src/kernel/nftables/constants.ts';
import { encodeNewChain, encodeNewTable, type ChainAdd } from '../../src/kernel/nftables/object-codec.ts';
import { openNfnlTransport } from '../../src/kernel/nftables/transport.ts';

/** The chains of objects.nft. */
export const OBJECT_CHAINS: readonly ChainAdd[] = [
  { family: 'ip', table: 'drover', name: 'nat-prerouting', base: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } },
  { family: 'ip', table: 'drover', name: 'filter-output', base: { type: 'filter', hook: 'output', priority: -110 } },
  { family: 'ip', table: 'drover', name: 'services' },
];

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const begin = 100;
  let seq = begin;
  const parts = [message(NFNL_MSG_BATCH_BEGIN, NLM_F.REQUEST, begin, NFPROTO.UNSPEC, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0))];
  const seqs: number[] = [];
  seq = nextSeq(seq);
  parts.push(encodeNewTable('ip', 'drover', seq));
  seqs.push(seq);
  for (const c of OBJECT_CHAINS) {
    seq = nextSeq(seq);
    parts.push(encodeNewChain(c, seq));
    seqs.push(seq);
  }
  parts.push(message(NFNL_MSG_BATCH_END, NLM_F.REQUEST, nextSeq(seq), NFPROTO.UNSPEC, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0)));
  const transport = openNfnlTransport(1 << 20, 1 << 20);
  const answers = new Map<number, number>();
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`answers for ${answers.size} of ${seqs.length} messages`)), 10_000);
    transport.onError(reject);
    transport.onDatagram((d) => {
      for (const m of parseMessages(d)) {
        if (m.type !== NLMSG_ERROR) continue;
        const ack = decodeAck(m);
        answers.set(ack.seq, ack.error);
        if (ack.seq === begin && ack.error !== 0) reject(new Error(`batch refused: errno ${ack.error}`));
      }
      if (seqs.every((s) => answers.has(s))) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  await transport.send(Buffer.concat(parts));
  try {
    await done;
    process.stdout.write(`${JSON.stringify(seqs.map((s) => answers.get(s)))}\n`);
  } finally {
    transport.close();
  }
}
