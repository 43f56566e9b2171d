/**
 * kube-proxy's nftables table as `drover takeover` reads and walks it
 * (src/takeover/kube-proxy-nftables.ts): the table the real kube-proxy
 * wrote for test/fixtures/kube-proxy-nftables/services.yaml (table.nft,
 * captured by scripts/peers/capture-kube-proxy-nftables.ts), each frontend
 * traced as a new connection from outside the node.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { walkTraceContext } from '../../src/modes/nftables/trace.ts';
import { NftListingError, parseNftListing } from '../../src/takeover/kube-proxy-nftables.ts';
import { CHECK_SOURCE, destinationsOf } from '../../src/takeover/verify.ts';
import type { Packet } from '../../src/inspect/trace.ts';

const LISTING = readFileSync(new URL('../fixtures/kube-proxy-nftables/table.nft', import.meta.url), 'utf8');
const NODE_IP = '192.168.100.1';
const table = parseNftListing(LISTING);
const ctx = walkTraceContext(table, new Set([NODE_IP, '10.180.0.254']), table.name);
const to = (dst: string, dport: number, proto: Packet['proto'] = 'tcp'): string[] => destinationsOf(ctx, { src: CHECK_SOURCE.IPv4, dst, dport, proto });

test('the listing reads as its sets, maps and chains, with hooks, priorities and policies', (t) => {
  t.is(table.name, 'ip kube-proxy');
  t.deepEqual([...table.sets.get('service-ips')!.elements], [
    ['172.30.0.50 . udp . 53', 'goto service-N3XEL7Y7-nsd/web/udp/dns'],
    ['172.30.0.50 . tcp . 80', 'goto service-LUTBLFVU-nsd/web/tcp/http'],
    ['172.30.0.51 . tcp . 80', 'goto service-IGEXGCDU-nsd/sticky/tcp/http'],
    ['172.30.0.52 . tcp . 80', 'goto service-KKOQGVD4-nsd/local/tcp/http'],
  ]);
  t.deepEqual([...table.sets.get('no-endpoint-services')!.elements], [
    ['172.30.0.53 . tcp . 80', 'goto reject-chain'],
    ['172.30.0.1 . tcp . 443', 'goto reject-chain'],
  ]);
  t.deepEqual([...table.sets.get('cluster-ips')!.elements.keys()], ['172.30.0.1', '172.30.0.50', '172.30.0.51', '172.30.0.52', '172.30.0.53']);
  t.is(table.sets.get('firewall-ips')!.elements.size, 0);
  t.deepEqual(table.chains.get('filter-prerouting-pre-dnat')!.base, { hook: 'prerouting', priority: -110, policy: 'accept' });
  t.deepEqual(table.chains.get('nat-postrouting')!.base, { hook: 'postrouting', priority: 100, policy: 'accept' });
  t.deepEqual(table.chains.get('filter-input')!.base, { hook: 'input', priority: 0, policy: 'accept' });
  t.deepEqual(table.chains.get('reject-chain')!.rules, [{ text: 'reject', shown: 'reject' }]);
  t.deepEqual(table.chains.get('external-LUTBLFVU-nsd/web/tcp/http')!.rules.map((r) => ('text' in r ? r.text : r.unknown)), ['meta mark set meta mark | 0x00004000', 'goto service-LUTBLFVU-nsd/web/tcp/http']);
});

test('each frontend goes where kube-proxy sends it: both endpoints, the affinity Service\'s, the Local one, REJECT without endpoints or port, DROP outside every ClusterIP', (t) => {
  const both = ['10.180.0.1:8080', '10.180.0.2:8080'];
  t.deepEqual(to('172.30.0.50', 80), both);
  t.deepEqual(to('172.30.0.50', 53, 'udp'), both);
  t.deepEqual(to(NODE_IP, 30080), both);
  t.deepEqual(to(NODE_IP, 30053, 'udp'), both);
  t.deepEqual(to('172.30.0.51', 80), ['10.180.0.1:8080', '10.180.0.3:8080']);
  t.deepEqual(to('172.30.0.52', 80), ['10.180.0.2:8080']);
  // externalTrafficPolicy Local with no endpoint on this node: dropped from outside.
  t.deepEqual(to(NODE_IP, 30082), ['DROP']);
  t.deepEqual(to('172.30.0.53', 80), ['REJECT']);
  t.deepEqual(to('172.30.0.50', 81), ['REJECT']);
  t.deepEqual(to('172.30.0.99', 80), ['DROP']);
  // Not a NodePort address of kube-proxy's: the node takes the connection itself.
  t.deepEqual(to('10.180.0.254', 30080), ['NO DNAT']);
});

test('a rule drover cannot evaluate makes the walk undecided, never a guess; a listing that is not one table is an error', (t) => {
  const bent = parseNftListing(LISTING.replace('meta l4proto tcp dnat to 10.180.0.2:8080', 'meta l4proto tcp queue num 3'));
  const c = walkTraceContext(bent, new Set([NODE_IP]), bent.name);
  t.regex(destinationsOf(c, { src: CHECK_SOURCE.IPv4, dst: '172.30.0.52', dport: 80, proto: 'tcp' }).join(' '), /^CANNOT EVALUATE/);
  t.throws(() => parseNftListing('chain x {\n}\n'), { instanceOf: NftListingError });
  t.throws(() => parseNftListing(LISTING.split('\n').slice(0, -3).join('\n')), { instanceOf: NftListingError, message: /ends inside a block/ });
  t.throws(() => parseNftListing(LISTING.replace('priority dstnat - 10', 'priority sideways')), { instanceOf: NftListingError, message: /priority "sideways"/ });
});
