/**
 * Which ClusterIP `--dns-intercept-cluster-dns` intercepts (src/dns/intercept.ts):
 * kube-system/kube-dns by default, or `--cluster-dns`, checked against a
 * snapshot built from real Service objects; each bad value is one line naming the flag.
 */
import test from 'ava';
import { interceptedAddress } from '../../src/dns/intercept.ts';
import { buildSnapshot } from '../../src/model/normalise.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { parse } from './model-helpers.ts';

const service = (namespace: string, name: string, clusterIPs: string[], ports: Array<{ port: number; protocol?: string; name?: string }>) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace },
  spec: { clusterIP: clusterIPs[0], clusterIPs, ipFamilyPolicy: clusterIPs.length > 1 ? 'RequireDualStack' : 'SingleStack', ipFamilies: clusterIPs.map((ip) => (ip.includes(':') ? 'IPv6' : 'IPv4')), ports },
});

/** A snapshot of kube-dns (dual-stack, 53/UDP, 53/TCP, 9153/TCP), default/web, and default/metrics (9153 only). */
function snapshot(): Snapshot {
  const raws = [
    service('kube-system', 'kube-dns', ['10.96.0.10', 'fd00:96::a'], [{ name: 'dns', port: 53, protocol: 'UDP' }, { name: 'dns-tcp', port: 53, protocol: 'TCP' }, { name: 'metrics', port: 9153 }]),
    service('default', 'web', ['10.96.0.50'], [{ name: 'dns', port: 53, protocol: 'UDP' }, { name: 'http', port: 80 }]),
    service('default', 'metrics', ['10.96.0.60'], [{ port: 9153 }]),
  ];
  const objects = raws.map((raw, i) => parse(raw, i)).flatMap((r) => (r.status === 'ok' ? [r.object] : []));
  return buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12' }).snapshot;
}

test('by default: the ClusterIP of kube-system/kube-dns of the family of --dns-address', (t) => {
  const snap = snapshot();
  t.is(interceptedAddress(snap, { dnsAddress: '169.254.20.10' }), '10.96.0.10');
  t.is(interceptedAddress(snap, { dnsAddress: 'fd00::20:10' }), 'fd00:96::a');
});

test('--cluster-dns names another Service with port 53', (t) => {
  t.is(interceptedAddress(snapshot(), { dnsAddress: '169.254.20.10', clusterDns: '10.96.0.50' }), '10.96.0.50');
});

test('a bad address is one line naming the flag', (t) => {
  const snap = snapshot();
  const err = (req: Parameters<typeof interceptedAddress>[1]) => t.throws(() => interceptedAddress(snap, req), { name: 'UsageError' })?.message;
  t.is(err({ dnsAddress: '169.254.20.10', clusterDns: '10.96.0.99' }), '--cluster-dns 10.96.0.99 is not the ClusterIP of a Service in the source');
  t.is(err({ dnsAddress: '169.254.20.10', clusterDns: 'fd00:96::a' }), '--cluster-dns fd00:96::a is IPv6 and --dns-address 169.254.20.10 is IPv4: the intercepted ClusterIP must be of the DNS address\'s family');
  t.is(err({ dnsAddress: '169.254.20.10', clusterDns: '169.254.20.10' }), '--cluster-dns 169.254.20.10 is --dns-address itself; name the cluster DNS Service\'s ClusterIP');
  t.is(err({ dnsAddress: '169.254.20.10', clusterDns: '10.96.0.60' }), '--cluster-dns 10.96.0.60: the Service default/metrics at 10.96.0.60 has no port 53');
  t.is(
    err({ dnsAddress: '169.254.20.10', dnsUpstream: [{ ip: '192.0.2.1', port: 53 }, { ip: '10.96.0.10', port: 53 }] }),
    '--dns-upstream 10.96.0.10:53 is the intercepted cluster DNS: forwarding to it would reach drover again',
  );
  t.is(interceptedAddress(snap, { dnsAddress: '169.254.20.10', dnsUpstream: [{ ip: '10.96.0.10', port: 5353 }] }), '10.96.0.10', 'another port of it is not intercepted');
  t.is(
    t.throws(() => interceptedAddress({ services: new Map() }, { dnsAddress: '169.254.20.10' }))?.message,
    '--dns-intercept-cluster-dns: the source has no Service kube-system/kube-dns with an IPv4 ClusterIP; name the cluster DNS ClusterIP with --cluster-dns',
  );
});
