import test from 'ava';
import { InvalidArgumentError } from 'commander';
import { renderOptions } from '../../src/cli/options.ts';

/** Run the argument parser of the option `long` on `value`. */
function parseFlag(long: string, value: string): unknown {
  const option = renderOptions().find((o) => o.long === long);
  if (option?.parseArg === undefined) throw new Error(`no parser for ${long}`);
  return option.parseArg(value, undefined);
}

test('--service-cidr rejects ranges that overlap non-unicast addresses or are shorter than /8', (t) => {
  t.is(parseFlag('--service-cidr', '10.96.0.0/12'), '10.96.0.0/12');
  const cases: Array<[string, string]> = [
    ['0.0.0.0/0', 'service CIDR 0.0.0.0/0 is too large (prefix must be /8 or longer)'],
    ['127.0.0.0/8', 'service CIDR 127.0.0.0/8 overlaps 127.0.0.0/8 (loopback addresses); use a private range such as 10.96.0.0/12'],
    ['224.0.0.0/4', 'service CIDR 224.0.0.0/4 is too large (prefix must be /8 or longer)'],
    ['169.254.0.0/16', 'service CIDR 169.254.0.0/16 overlaps 169.254.0.0/16 (link-local addresses); use a private range such as 10.96.0.0/12'],
  ];
  for (const [value, message] of cases) t.throws(() => parseFlag('--service-cidr', value), { instanceOf: InvalidArgumentError, message }, value);
});

test('--cluster-cidr rejects /0 and points to --masquerade-all', (t) => {
  t.is(parseFlag('--cluster-cidr', '10.244.0.0/16'), '10.244.0.0/16');
  t.is(parseFlag('--cluster-cidr', '0.0.0.0/1'), '0.0.0.0/1');
  t.throws(() => parseFlag('--cluster-cidr', '0.0.0.0/0'), {
    instanceOf: InvalidArgumentError,
    message: 'cluster CIDR 0.0.0.0/0 matches every address; to masquerade everything, use --masquerade-all instead',
  });
  t.throws(() => parseFlag('--cluster-cidr', '10.244.0.1/16'), { instanceOf: InvalidArgumentError, message: '"10.244.0.1/16" has host bits set; did you mean "10.244.0.0/16"?' });
});

test('--service-node-port-range reads the API server\'s forms and refuses the rest with one line', (t) => {
  t.deepEqual(parseFlag('--service-node-port-range', '30000-32767'), { first: 30000, last: 32767 });
  t.deepEqual(parseFlag('--service-node-port-range', '20000+100'), { first: 20000, last: 20100 });
  t.throws(() => parseFlag('--service-node-port-range', '32767-30000'), { instanceOf: InvalidArgumentError, message: '"32767-30000": the end port is less than the start port' });
  t.throws(() => parseFlag('--service-node-port-range', 'ssh'), { instanceOf: InvalidArgumentError, message: '"ssh" is not a port range (expected e.g. 30000-32767)' });
  const option = renderOptions().find((o) => o.long === '--service-node-port-range')!;
  // No default of the flag's own: each source decides (30000-32767; the Kubernetes API's Services are not checked, its server did).
  t.is(option.defaultValue, undefined);
  t.regex(option.description, /default: 30000-32767; with --source kubernetes, every port/);
});
