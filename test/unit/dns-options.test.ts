import test from 'ava';
import { Command } from 'commander';
import { dnsOptions } from '../../src/cli/dns-options.ts';

/** Parse `args` with the DNS flags alone; the options, or the error line commander would print. */
function parse(args: string[]): Record<string, unknown> | string {
  const cmd = new Command('run').exitOverride().configureOutput({ writeErr: () => undefined });
  for (const o of dnsOptions()) cmd.addOption(o);
  try {
    cmd.parse(args, { from: 'user' });
    return cmd.opts();
  } catch (err) {
    return (err as Error).message;
  }
}

test('the DNS flags: off by default, and their defaults', (t) => {
  t.deepEqual(parse([]), { dnsPort: 53, clusterDomain: 'cluster.local', dnsTtl: 5 });
  t.deepEqual(parse(['--dns-address', '169.254.20.10', '--cluster-domain', 'Cluster.Example.', '--dns-ttl', '30', '--dns-port', '5353', '--dns-upstream', '192.0.2.1, [2001:db8::1]:5353']), {
    dnsAddress: '169.254.20.10',
    dnsPort: 5353,
    clusterDomain: 'cluster.example',
    dnsTtl: 30,
    dnsUpstream: [{ ip: '192.0.2.1', port: 53 }, { ip: '2001:db8::1', port: 5353 }],
  });
  t.deepEqual(parse(['--dns-address', '169.254.20.10', '--dns-intercept-cluster-dns', '--cluster-dns', '10.96.0.10']), {
    dnsAddress: '169.254.20.10',
    dnsPort: 53,
    clusterDomain: 'cluster.local',
    dnsTtl: 5,
    dnsInterceptClusterDns: true,
    clusterDns: '10.96.0.10',
  });
});

test('a bad DNS flag value is one line naming the flag and the value', (t) => {
  t.is(parse(['--dns-address', '169.254.20']), "error: option '--dns-address <ip>' argument '169.254.20' is invalid. \"169.254.20\" is not an IPv4 or IPv6 address");
  t.regex(parse(['--dns-address', '0.0.0.0']) as string, /"0\.0\.0\.0" is not a unicast address/);
  t.regex(parse(['--dns-address', '224.0.0.1']) as string, /is not a unicast address/);
  t.regex(parse(['--dns-port', '0']) as string, /'--dns-port <port>' argument '0' is invalid\. "0" is not a port, an integer of 1-65535/);
  t.regex(parse(['--dns-ttl', '-1']) as string, /'--dns-ttl <seconds>' argument '-1' is invalid/);
  t.regex(parse(['--cluster-domain', 'bad_domain']) as string, /"bad_domain" is not a domain name of DNS-1123 labels/);
  t.is(parse(['--cluster-dns', '10.96.0.']), "error: option '--cluster-dns <ip>' argument '10.96.0.' is invalid. \"10.96.0.\" is not an IPv4 or IPv6 address");
  t.regex(parse(['--dns-upstream', '192.0.2.1,dns.example']) as string, /upstream DNS server "dns\.example" is not IP, IP:PORT or \[IPv6\]:PORT/);
});
