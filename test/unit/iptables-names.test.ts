import test from 'ava';
import { base32, endpointChainName, serviceChainName } from '../../src/modes/shared/kube-chains/names.ts';

// Vectors from kube-proxy's pkg/proxy/iptables/proxier_test.go.
test('KUBE-SVC chain names match kube-proxy', (t) => {
  t.is(serviceChainName('ns1/svc1:p80', 'tcp'), 'KUBE-SVC-XPGD46QRK7WJZT7O');
  t.is(serviceChainName('ns3/svc3:p80', 'tcp'), 'KUBE-SVC-X27LE4BHSL4DOUIK');
  t.is(serviceChainName('ns2/svc2:p8080', 'tcp'), 'KUBE-SVC-2VJB64SDSIJUP5T6');
});

test('KUBE-SEP chain names match kube-proxy', (t) => {
  t.is(endpointChainName('ns1/svc1:p80', 'tcp', '10.180.0.1:80'), 'KUBE-SEP-SXIVWICOYRO3J4NJ');
});

test('the protocol is part of the hash', (t) => {
  t.not(serviceChainName('ns1/svc1:p80', 'udp'), serviceChainName('ns1/svc1:p80', 'tcp'));
});

test('base32 follows RFC 4648 test vectors', (t) => {
  const enc = (s: string) => base32(Buffer.from(s));
  t.is(enc(''), '');
  t.is(enc('f'), 'MY======');
  t.is(enc('fo'), 'MZXQ====');
  t.is(enc('foo'), 'MZXW6===');
  t.is(enc('foob'), 'MZXW6YQ=');
  t.is(enc('fooba'), 'MZXW6YTB');
  t.is(enc('foobar'), 'MZXW6YTBOI======');
});
