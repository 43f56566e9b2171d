import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DroverError, describeOrigin, fileOrigin, UsageError } from '../../src/errors.ts';
import { NotRunError } from '../../src/inspect/status.ts';
import { ManifestError, objectError } from '../../src/model/errors.ts';
import { UnknownServiceError } from '../../src/modes/shared/kube-chains/chains.ts';
import { RestoreError } from '../../src/kernel/iptables/exec.ts';
import { IptablesParseError } from '../../src/kernel/iptables/parse.ts';
import { UnsafeValueError } from '../../src/modes/iptables/render.ts';
import { RuleSyntaxError } from '../../src/kernel/iptables/rule.ts';
import { IpvsDecodeError, IpvsUnsupportedError, IpvsValidationError } from '../../src/kernel/ipvs/codec.ts';
import { IpsetTypeError } from '../../src/modes/ipvs/ipset.ts';
import { IpsetValidationError } from '../../src/kernel/ipset/ipset.ts';
import { IpvsApplyError } from '../../src/modes/ipvs/kernel.ts';
import { IpvsClientClosedError, IpvsRequestError, IpvsUnavailableError } from '../../src/kernel/ipvs/client.ts';
import { CommandError } from '../../src/kernel/exec.ts';
import { NftBatchTooLargeError, NftClientClosedError, NftRequestError, NftTimeoutError } from '../../src/kernel/nftables/client.ts';
import { NftDecodeError, NftValidationError } from '../../src/kernel/nftables/errors.ts';

test('DroverError keeps the message as given and carries origin, field and cause', (t) => {
  const cause = new Error('inner');
  const e = new DroverError('something is wrong', { origin: fileOrigin('a.yaml', { index: 1 }), field: 'spec.type', cause });
  t.true(e instanceof Error);
  t.is(e.message, 'something is wrong');
  t.is(e.name, 'DroverError');
  t.deepEqual(e.origin, { type: 'file', file: 'a.yaml', index: 1 });
  t.is(e.field, 'spec.type');
  t.is(e.cause, cause);
  const bare = new DroverError('x');
  t.is(bare.origin, undefined);
  t.is(bare.field, undefined);
  t.false('cause' in bare);
});

test('describeOrigin: file, file:line, file:line:column; the column needs a line; odd file names quoted', (t) => {
  t.is(describeOrigin(fileOrigin('a.yaml')), 'a.yaml');
  t.is(describeOrigin(fileOrigin('a.yaml', { index: 4 })), 'a.yaml');
  t.is(describeOrigin(fileOrigin('a.yaml', { line: 3 })), 'a.yaml:3');
  t.is(describeOrigin(fileOrigin('a.yaml', { line: 3, column: 5 })), 'a.yaml:3:5');
  t.is(describeOrigin(fileOrigin('a.yaml', { column: 5 })), 'a.yaml');
  t.is(describeOrigin(fileOrigin('a\nb.yaml')), '"a\\nb.yaml"');
});

test('fileOrigin leaves out the positions that are undefined', (t) => {
  t.deepEqual(fileOrigin('a.yaml', { index: undefined, line: 2, column: undefined }), { type: 'file', file: 'a.yaml', line: 2 });
});

test('ManifestError is a DroverError whose origin and field round-trip, with its message unchanged', (t) => {
  const e = new ManifestError({ file: 'examples/bad.yaml', kind: 'Service', object: 'default/web', index: 2, field: 'spec.ports[0].port', detail: '70000 is out of range 1-65535' });
  t.true(e instanceof DroverError);
  t.is(e.name, 'ManifestError');
  t.is(e.message, 'examples/bad.yaml: Service default/web: spec.ports[0].port: 70000 is out of range 1-65535');
  t.is(String(e), e.message);
  t.deepEqual(e.origin, { type: 'file', file: 'examples/bad.yaml', index: 2 });
  t.is(e.field, 'spec.ports[0].port');
  t.is(e.file, 'examples/bad.yaml');
  t.is(e.index, 2);

  const syntax = new ManifestError({ file: 'a.yaml', line: 3, column: 5, detail: 'syntax error: x\ny' });
  t.deepEqual(syntax.origin, { type: 'file', file: 'a.yaml', line: 3, column: 5 });
  t.is(syntax.field, '');
  t.is(syntax.message, 'a.yaml:3:5: syntax error: x y');

  const noted = e.withNote('skipped');
  t.true(noted instanceof DroverError);
  t.deepEqual(noted.origin, e.origin);
  t.is(noted.field, e.field);
  t.is(noted.message, 'examples/bad.yaml: Service default/web: spec.ports[0].port: 70000 is out of range 1-65535; skipped');

  const o = objectError({ file: 'b.yaml', kind: 'EndpointSlice', namespace: 'ns', name: 'web-1', index: 0 }, 'endpoints[0]', 'bad');
  t.deepEqual(o.origin, { type: 'file', file: 'b.yaml', index: 0 });
  t.is(o.field, 'endpoints[0]');
  t.is(o.message, 'b.yaml: EndpointSlice ns/web-1: endpoints[0]: bad');
});

test('every error class drover exports is a DroverError, and keeps its own name and message', (t) => {
  const examples: readonly [Error, string, string][] = [
    [new ManifestError({ file: 'a.yaml', detail: 'x' }), 'ManifestError', 'a.yaml: x'],
    [new UsageError('no such mode'), 'UsageError', 'no such mode'],
    [new CommandError('ipset save', 1, 'ipset v7.1: bad\nTry `ipset help`'), 'CommandError', 'ipset save exited with 1: ipset v7.1: bad'],
    [new IpvsUnavailableError(), 'IpvsUnavailableError', 'IPVS is not available in this kernel (generic netlink family IPVS not found)'],
    [new IpvsRequestError('DEL_DEST', 'ENOENT', 2), 'IpvsRequestError', 'IPVS DEL_DEST failed: ENOENT (no such destination)'],
    [new IpvsClientClosedError('closed'), 'IpvsClientClosedError', 'IPVS netlink client is closed: closed'],
    [new IpsetValidationError('IPv4 address', '1.2.3'), 'IpsetValidationError', 'refusing to write IPv4 address "1.2.3" to ipset: not valid'],
    [new IpsetTypeError('KUBE-CLUSTER-IP', 'hash:ip', 'hash:ip,port,ip'), 'IpsetTypeError', 'ipset KUBE-CLUSTER-IP exists with type hash:ip, drover needs hash:ip,port,ip: remove it with drover cleanup --mode ipvs (which first deletes the rules that use it) and restart drover'],
    [new IpvsApplyError([{ op: { kind: 'del-service', vs: { protocol: 'TCP', address: '10.0.0.1', port: 80 } }, error: new Error('boom') }], 3), 'IpvsApplyError', ''],
    [new IpvsValidationError('realServer.weight', '70000 is out of range 0-65535'), 'IpvsValidationError', 'invalid IPVS realServer.weight: 70000 is out of range 0-65535'],
    [new IpvsDecodeError('no address'), 'IpvsDecodeError', 'IPVS reply: no address'],
    [new IpvsUnsupportedError('fwmark service'), 'IpvsUnsupportedError', 'IPVS reply: fwmark service'],
    [new UnknownServiceError('no service default/web'), 'UnknownServiceError', 'no service default/web'],
    [new IptablesParseError(4, 'no table'), 'IptablesParseError', 'iptables-save text, line 4: no table'],
    [new UnsafeValueError('port', '80 -j ACCEPT'), 'UnsafeValueError', 'refusing to render port "80 -j ACCEPT": not a valid token'],
    [new RuleSyntaxError('-A X "', 'unbalanced quotes'), 'RuleSyntaxError', 'cannot parse rule "-A X "": unbalanced quotes'],
    [new RestoreError('iptables-restore: line 2 failed', 2, '-A KUBE-X'), 'RestoreError', 'iptables-restore failed at line 2: -A KUBE-X: iptables-restore: line 2 failed'],
    [new NotRunError('drover has not run: no status file at /x'), 'NotRunError', 'drover has not run: no status file at /x'],
    [new NftValidationError('changes[0].table', '"a b" is not 1-255 of [A-Za-z0-9_.-]'), 'NftValidationError', 'invalid nf_tables changes[0].table: "a b" is not 1-255 of [A-Za-z0-9_.-]'],
    [new NftDecodeError('no NFTA_GEN_ID'), 'NftDecodeError', 'nf_tables reply: no NFTA_GEN_ID'],
    [new NftRequestError('list', { family: 'ip', table: 'drover', set: 'svc' }, 'ENOENT', 2), 'NftRequestError', 'nf_tables listing of set ip drover svc failed: ENOENT (no such table or set)'],
    [new NftRequestError('batch', undefined, 'EPERM', 1), 'NftRequestError', 'nf_tables batch failed: EPERM (CAP_NET_ADMIN is required)'],
    [new NftClientClosedError('closed'), 'NftClientClosedError', 'nf_tables netlink client is closed: closed'],
    [new NftTimeoutError('commit', 10), 'NftTimeoutError', 'nf_tables netlink client is closed: commit: no answer from the kernel within 10 ms'],
    [new NftBatchTooLargeError(9, 8), 'NftBatchTooLargeError', "nf_tables batch of 9 bytes is over this socket's limit of 8 bytes; commit the changes in smaller batches"],
  ];
  for (const [e, name, message] of examples) {
    t.true(e instanceof DroverError, name);
    t.is(e.name, name);
    if (message !== '') t.is(e.message, message, name);
  }
  t.regex(examples.find(([, n]) => n === 'IpvsApplyError')![0].message, /^1 of 3 IPVS commands failed; first: .*: boom$/);
  const v = new IpvsValidationError('service.port', 'bad');
  t.is(v.field, 'service.port');
  t.is(v.origin, undefined);
});

test('no class in src extends Error directly except DroverError', (t) => {
  const offenders: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.(ts|mts|js|mjs)$/.test(entry.name)) {
        for (const m of readFileSync(path, 'utf8').matchAll(/class (\w+) extends Error\b/g)) {
          if (m[1] !== 'DroverError') offenders.push(`${path}: ${m[1]}`);
        }
      }
    }
  };
  walk(fileURLToPath(new URL('../../src', import.meta.url)));
  t.deepEqual(offenders, []);
});
