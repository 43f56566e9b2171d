import test from 'ava';
import { iptablesPayload, nftRuleset } from '../../src/dns/dataplane.ts';

test('iptables and IPVS modes: DROVER-DNS in raw (NOTRACK) and filter (ACCEPT), DNS to and from the address', (t) => {
  t.is(
    iptablesPayload({ address: '169.254.20.10', port: 53 }),
    [
      '*raw',
      ':DROVER-DNS - [0:0]',
      '-A DROVER-DNS -d 169.254.20.10/32 -p udp -m udp --dport 53 -j NOTRACK',
      '-A DROVER-DNS -s 169.254.20.10/32 -p udp -m udp --sport 53 -j NOTRACK',
      '-A DROVER-DNS -d 169.254.20.10/32 -p tcp -m tcp --dport 53 -j NOTRACK',
      '-A DROVER-DNS -s 169.254.20.10/32 -p tcp -m tcp --sport 53 -j NOTRACK',
      'COMMIT',
      '*filter',
      ':DROVER-DNS - [0:0]',
      '-A DROVER-DNS -d 169.254.20.10/32 -p udp -m udp --dport 53 -j ACCEPT',
      '-A DROVER-DNS -s 169.254.20.10/32 -p udp -m udp --sport 53 -j ACCEPT',
      '-A DROVER-DNS -d 169.254.20.10/32 -p tcp -m tcp --dport 53 -j ACCEPT',
      '-A DROVER-DNS -s 169.254.20.10/32 -p tcp -m tcp --sport 53 -j ACCEPT',
      'COMMIT',
      '',
    ].join('\n'),
  );
  t.regex(iptablesPayload({ address: 'fd00::a', port: 5353 }), /^-A DROVER-DNS -d fd00::a\/128 -p udp -m udp --dport 5353 -j NOTRACK$/m);
});

test('nftables mode: the table inet drover-dns, notrack at the raw priority, accept at the filter priority', (t) => {
  t.is(
    nftRuleset({ address: '169.254.20.10', port: 53 }),
    [
      'table inet drover-dns {}',
      'delete table inet drover-dns',
      'table inet drover-dns {',
      '  chain raw-prerouting {',
      '    type filter hook prerouting priority raw; policy accept;',
      '    ip daddr 169.254.20.10 udp dport 53 notrack',
      '    ip daddr 169.254.20.10 tcp dport 53 notrack',
      '    ip saddr 169.254.20.10 udp sport 53 notrack',
      '    ip saddr 169.254.20.10 tcp sport 53 notrack',
      '  }',
      '  chain raw-output {',
      '    type filter hook output priority raw; policy accept;',
      '    ip daddr 169.254.20.10 udp dport 53 notrack',
      '    ip daddr 169.254.20.10 tcp dport 53 notrack',
      '    ip saddr 169.254.20.10 udp sport 53 notrack',
      '    ip saddr 169.254.20.10 tcp sport 53 notrack',
      '  }',
      '  chain input {',
      '    type filter hook input priority filter; policy accept;',
      '    ip daddr 169.254.20.10 udp dport 53 accept',
      '    ip daddr 169.254.20.10 tcp dport 53 accept',
      '    ip saddr 169.254.20.10 udp sport 53 accept',
      '    ip saddr 169.254.20.10 tcp sport 53 accept',
      '  }',
      '  chain output {',
      '    type filter hook output priority filter; policy accept;',
      '    ip daddr 169.254.20.10 udp dport 53 accept',
      '    ip daddr 169.254.20.10 tcp dport 53 accept',
      '    ip saddr 169.254.20.10 udp sport 53 accept',
      '    ip saddr 169.254.20.10 tcp sport 53 accept',
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  t.regex(nftRuleset({ address: 'fd00::a', port: 53 }), /^ {4}ip6 daddr fd00::a udp dport 53 notrack$/m);
});

test('--dns-intercept-cluster-dns: the same rules for the cluster DNS ClusterIP, port 53, after those of the address', (t) => {
  const ep = { address: '169.254.20.10', port: 5353, intercept: '10.96.0.10' };
  const raw = iptablesPayload(ep).split('COMMIT')[0]!.split('\n').filter((l) => l.startsWith('-A '));
  t.deepEqual(raw, [
    '-A DROVER-DNS -d 169.254.20.10/32 -p udp -m udp --dport 5353 -j NOTRACK',
    '-A DROVER-DNS -s 169.254.20.10/32 -p udp -m udp --sport 5353 -j NOTRACK',
    '-A DROVER-DNS -d 169.254.20.10/32 -p tcp -m tcp --dport 5353 -j NOTRACK',
    '-A DROVER-DNS -s 169.254.20.10/32 -p tcp -m tcp --sport 5353 -j NOTRACK',
    '-A DROVER-DNS -d 10.96.0.10/32 -p udp -m udp --dport 53 -j NOTRACK',
    '-A DROVER-DNS -s 10.96.0.10/32 -p udp -m udp --sport 53 -j NOTRACK',
    '-A DROVER-DNS -d 10.96.0.10/32 -p tcp -m tcp --dport 53 -j NOTRACK',
    '-A DROVER-DNS -s 10.96.0.10/32 -p tcp -m tcp --sport 53 -j NOTRACK',
  ]);
  t.is(iptablesPayload(ep).match(/-A DROVER-DNS -[ds] 10\.96\.0\.10\/32 -p (udp|tcp) -m \1 --[ds]port 53 -j ACCEPT/g)?.length, 4);
  const prerouting = /chain raw-prerouting \{\n[^\n]*\n((?: {4}[^\n]*\n)*) {2}\}/.exec(nftRuleset(ep))![1]!.trimEnd().split('\n').map((l) => l.trim());
  t.deepEqual(prerouting, [
    'ip daddr 169.254.20.10 udp dport 5353 notrack',
    'ip daddr 169.254.20.10 tcp dport 5353 notrack',
    'ip saddr 169.254.20.10 udp sport 5353 notrack',
    'ip saddr 169.254.20.10 tcp sport 5353 notrack',
    'ip daddr 10.96.0.10 udp dport 53 notrack',
    'ip daddr 10.96.0.10 tcp dport 53 notrack',
    'ip saddr 10.96.0.10 udp sport 53 notrack',
    'ip saddr 10.96.0.10 tcp sport 53 notrack',
  ]);
  t.is(nftRuleset(ep).match(/ip [ds]addr 10\.96\.0\.10 (udp|tcp) [ds]port 53 accept/g)?.length, 8);
  t.regex(nftRuleset({ address: 'fd00::a', port: 53, intercept: 'fd00:96::a' }), /^ {4}ip6 daddr fd00:96::a udp dport 53 notrack$/m);
});

test('nothing unchecked reaches a command line', (t) => {
  t.throws(() => iptablesPayload({ address: '10.0.0.1 -j DROP', port: 53 }), { instanceOf: TypeError });
  t.throws(() => nftRuleset({ address: '10.0.0.1', port: 0 }), { instanceOf: TypeError });
  t.throws(() => iptablesPayload({ address: '169.254.20.10', port: 53, intercept: '10.96.0.10 -j DROP' }), { instanceOf: TypeError });
  t.throws(() => nftRuleset({ address: '169.254.20.10', port: 53, intercept: 'fd00::a' }), { instanceOf: TypeError }, 'another family');
  t.throws(() => nftRuleset({ address: '169.254.20.10', port: 53, intercept: '169.254.20.10' }), { instanceOf: TypeError }, 'the address itself');
});
