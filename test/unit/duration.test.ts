/**
 * The Go duration parser against Go's own cases: parseDurationTests and
 * parseDurationErrorTests of src/time/time_test.go, values in nanoseconds.
 */
import test from 'ava';
import { DurationError, parseDurationMs, parseGoDuration } from '../../src/util/duration.ts';

const ns = 1n;
const us = 1000n * ns;
const ms = 1000n * us;
const s = 1000n * ms;
const m = 60n * s;
const h = 60n * m;

/** Go's parseDurationTests. */
const GO_CASES: ReadonlyArray<readonly [string, bigint]> = [
  // simple
  ['0', 0n],
  ['5s', 5n * s],
  ['30s', 30n * s],
  ['1478s', 1478n * s],
  // sign
  ['-5s', -5n * s],
  ['+5s', 5n * s],
  ['-0', 0n],
  ['+0', 0n],
  // decimal
  ['5.0s', 5n * s],
  ['5.6s', 5n * s + 600n * ms],
  ['5.s', 5n * s],
  ['.5s', 500n * ms],
  ['1.0s', 1n * s],
  ['1.00s', 1n * s],
  ['1.004s', 1n * s + 4n * ms],
  ['1.0040s', 1n * s + 4n * ms],
  ['100.00100s', 100n * s + 1n * ms],
  // different units
  ['10ns', 10n * ns],
  ['11us', 11n * us],
  ['12\u00b5s', 12n * us],
  ['12\u03bcs', 12n * us],
  ['13ms', 13n * ms],
  ['14s', 14n * s],
  ['15m', 15n * m],
  ['16h', 16n * h],
  // composite durations
  ['3h30m', 3n * h + 30n * m],
  ['10.5s4m', 4n * m + 10n * s + 500n * ms],
  ['-2m3.4s', -(2n * m + 3n * s + 400n * ms)],
  ['1h2m3s4ms5us6ns', 1n * h + 2n * m + 3n * s + 4n * ms + 5n * us + 6n * ns],
  ['39h9m14.425s', 39n * h + 9n * m + 14n * s + 425n * ms],
  // large value
  ['52763797000ns', 52763797000n * ns],
  // more than 9 digits after the decimal point
  ['0.3333333333333333333h', 20n * m],
  // 1<<53+1 cannot be stored exactly in a float64
  ['9007199254740993ns', (1n << 53n) + 1n],
  // the largest duration an int64 of nanoseconds holds
  ['9223372036854775807ns', (1n << 63n) - 1n],
  ['9223372036854775.807us', (1n << 63n) - 1n],
  ['9223372036s854ms775us807ns', (1n << 63n) - 1n],
  ['-9223372036854775808ns', -(1n << 63n)],
  ['-9223372036854775.808us', -(1n << 63n)],
  ['-9223372036s854ms775us808ns', -(1n << 63n)],
  // the largest negative round-trip value
  ['-2562047h47m16.854775808s', -(1n << 63n)],
  // a huge string
  ['0.100000000000000000000h', 6n * m],
  // the first overflow check of leadingFraction
  ['0.830103483285477580700h', 49n * m + 48n * s + 372539827n * ns],
];

/** Go's parseDurationErrorTests. */
const GO_ERRORS: readonly string[] = [
  '',
  '3',
  '-',
  's',
  '.',
  '-.',
  '.s',
  '+.s',
  '1d',
  '\x85\x85',
  '\xffff',
  'hello \xffff world',
  '\uFFFD',
  '\uFFFD hello \uFFFD world',
  // overflow
  '9223372036854775810ns',
  '9223372036854775808ns',
  '-9223372036854775809ns',
  '9223372036854776us',
  '3000000h',
  '9223372036854775.808us',
  '9223372036854ms775us808ns',
];

test("every case of Go's parseDurationTests gives Go's value", (t) => {
  for (const [text, want] of GO_CASES) t.is(parseGoDuration(text), want, text);
});

test("every case of Go's parseDurationErrorTests is refused, naming the text", (t) => {
  for (const text of GO_ERRORS) {
    const err = t.throws(() => parseGoDuration(text), { instanceOf: DurationError }, JSON.stringify(text));
    t.true(err!.message.startsWith(`${JSON.stringify(text)} is not a duration`), err!.message);
  }
});

test('the usual flag values, and what is not a Go duration', (t) => {
  t.is(parseGoDuration('1m0s'), 60n * s);
  t.is(parseGoDuration('1.5h'), 90n * m);
  t.is(parseGoDuration('300ms'), 300n * ms);
  for (const text of ['1 s', ' 1s', '1s ', '1S', '1sec', '1h 2m', '30', 'soon']) t.throws(() => parseGoDuration(text), { instanceOf: DurationError }, text);
  t.is(t.throws(() => parseGoDuration('30'))!.message, '"30" is not a duration: a unit is missing (ns, us, ms, s, m, h) (e.g. 30s, 1m0s, 500ms, 1h2m3.5s)');
  t.is(t.throws(() => parseGoDuration('1d'))!.message, '"1d" is not a duration: unknown unit "d" (ns, us, ms, s, m, h) (e.g. 30s, 1m0s, 500ms, 1h2m3.5s)');
});

test('milliseconds: a fraction rounds away from zero; negative and too long are refused unless allowed', (t) => {
  t.is(parseDurationMs('1m0s'), 60_000);
  t.is(parseDurationMs('1h2m3.5s'), 3_723_500);
  t.is(parseDurationMs('0'), 0);
  t.is(parseDurationMs('1ns'), 1);
  t.is(parseDurationMs('1.5ms'), 2);
  t.is(parseDurationMs('-1s', { negative: true }), -1000);
  t.is(t.throws(() => parseDurationMs('-1s'))!.message, '"-1s" is negative; a duration here is 0 or more');
  t.is(parseDurationMs('24h', { maxMs: 86_400_000 }), 86_400_000);
  t.is(t.throws(() => parseDurationMs('25h', { maxMs: 86_400_000, maxText: '1 day' }))!.message, '"25h" is longer than the longest duration drover takes, 1 day');
});
