import test from 'ava';
import { readFileSync } from 'node:fs';
import { NftDecodeError, nftType, parseMessages } from '../../src/kernel/nftables/codec.ts';
import { NFT_MSG } from '../../src/kernel/nftables/constants.ts';
import { scanNotifications } from '../../src/kernel/nftables/notify.ts';

/** The datagrams of notify-add.hex (capture-notify.ts): what a member of NFNLGRP_NFTABLES read while nft committed setup.nft, then add.nft. */
const DATAGRAMS = readFileSync(new URL('../fixtures/nftables/notify-add.hex', import.meta.url), 'utf8')
  .trim()
  .split('\n')
  .map((line) => Buffer.from(line.split(' ')[1]!, 'hex'));

test('a commit announces its objects, then NEWGEN in a datagram of its own, with the generation id, pid and name of nft', (t) => {
  const scans = DATAGRAMS.map((d) => scanNotifications(d));
  // setup.nft: its objects, then NEWGEN; add.nft: its two element messages, then NEWGEN.
  t.deepEqual(
    scans.map((s) => s.commits.map((c) => [c.gen, c.name])),
    [[], [[2, 'nft']], [], [[3, 'nft']]],
  );
  t.true(scans.every((s) => s.commits.length === 0 || s.messages === 1), 'NEWGEN comes alone');
  // The element datagram holds the NEWSETELEM messages of add.nft and nothing the scan takes for a commit.
  const elements = parseMessages(DATAGRAMS[2]!);
  t.true(elements.length >= 1 && elements.every((m) => m.type === nftType(NFT_MSG.NEWSETELEM)));
  t.is(scans[2]!.messages, elements.length);
  const pid = scans[1]!.commits[0]!.pid!;
  t.true(pid > 0);
  t.not(scans[3]!.commits[0]!.pid, pid, 'another nft process');
});

test('several datagrams run together scan as one, in order', (t) => {
  const all = scanNotifications(Buffer.concat(DATAGRAMS));
  t.deepEqual(
    all.commits.map((c) => c.gen),
    [2, 3],
  );
  t.is(all.messages, DATAGRAMS.reduce((n, d) => n + parseMessages(d).length, 0));
});

test('a message length that runs past the datagram, or a NEWGEN without its id, is a decode error', (t) => {
  const cut = DATAGRAMS[1]!.subarray(0, DATAGRAMS[1]!.length - 4);
  t.throws(() => scanNotifications(cut), { instanceOf: NftDecodeError, message: /malformed netlink notification at offset 0/ });
  // NEWGEN with its payload cut to the nfgenmsg: no NFTA_GEN_ID.
  const bare = Buffer.from(DATAGRAMS[1]!.subarray(0, 20));
  bare.writeUInt32LE(20, 0);
  t.throws(() => scanNotifications(bare), { instanceOf: NftDecodeError, message: /NFTA_GEN_ID/ });
});
