/**
 * LastKnownGood.resolveFiles against LastKnownGood.resolve: over random
 * folders and random changes to a few of their files, deciding the changed
 * files alone (when it does not decline) serves exactly what deciding the
 * whole read serves, with the same warnings and no error.
 */
import { deepStrictEqual, strictEqual } from 'node:assert/strict';
import test from 'ava';
import fc from 'fast-check';
import { ManifestError } from '../../src/model/errors.ts';
import { parseObject, type ParseResult } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import { LastKnownGood, type FileReread } from '../../src/sources/last-good.ts';

const FILES = ['a.json', 'b.json', 'c.json', 'd.json'];

/** One object of a file: a valid or invalid Service, a slice with a bad address (a warning), or an ignored kind. */
type Spec = { readonly what: 'valid' | 'invalid' | 'warned'; readonly name: string; readonly port: number } | { readonly what: 'ignored' };

/** A file: its objects, or a read error (syntax), or absent. */
type FileSpec = { readonly objects: readonly Spec[]; readonly broken: boolean } | undefined;

const named = (what: 'valid' | 'invalid' | 'warned') => fc.record({ what: fc.constant(what), name: fc.constantFrom('p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z'), port: fc.constantFrom(80, 81) });
const spec: fc.Arbitrary<Spec> = fc.oneof(
  { arbitrary: named('valid'), weight: 8 },
  { arbitrary: named('warned'), weight: 2 },
  { arbitrary: named('invalid'), weight: 1 },
  { arbitrary: fc.constant({ what: 'ignored' as const }), weight: 1 },
);
const fileSpec: fc.Arbitrary<FileSpec> = fc.option(fc.record({ objects: fc.array(spec, { maxLength: 3 }), broken: fc.constantFrom(false, false, false, false, false, false, false, true) }), { nil: undefined });
const folder = fc.tuple(...FILES.map(() => fileSpec));

/** Parse results are cached by their text, as the file source reuses the validation of an unchanged object. */
const parsed = new Map<string, ParseResult>();

function raw(s: Spec): unknown {
  if (s.what === 'ignored') return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm' } };
  if (s.what === 'warned') {
    return {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: s.name, namespace: 'default', labels: { 'kubernetes.io/service-name': s.name } },
      addressType: 'IPv4',
      ports: [{ port: s.port }],
      endpoints: [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.300'] }],
    };
  }
  return { apiVersion: 'v1', kind: 'Service', metadata: { name: s.name, namespace: 'default' }, spec: { clusterIP: '10.96.0.1', ports: [{ port: s.what === 'valid' ? s.port : 70000 }] } };
}

function resultOf(file: string, index: number, s: Spec): ParseResult {
  const key = `${file}#${index}#${JSON.stringify(s)}`;
  let r = parsed.get(key);
  if (r === undefined) parsed.set(key, (r = parseObject({ file, index, raw: raw(s) })));
  return r;
}

/** A file as read: its objects with their results, or its syntax error. */
function reread(file: string, f: NonNullable<FileSpec>): FileReread & { readonly objects: Array<{ file: string; index: number; result: ParseResult }> } {
  if (f.broken) return { objects: [], errors: [new ManifestError({ file, detail: 'syntax error; file skipped' })] };
  return { objects: f.objects.map((s, index) => ({ file, index, result: resultOf(file, index, s) })), errors: [] };
}

/** resolve() of the whole folder. */
function resolveAll(lkg: LastKnownGood, state: readonly FileSpec[]) {
  const objects: Array<{ file: string; index: number; result: ParseResult }> = [];
  const errors: ManifestError[] = [];
  const files: string[] = [];
  state.forEach((f, i) => {
    if (f === undefined) return;
    const file = FILES[i]!;
    files.push(file);
    const r = reread(file, f);
    objects.push(...r.objects);
    errors.push(...r.errors);
  });
  return lkg.resolve({ objects, errors, files }, objects.map((o) => o.result));
}

const served = (byFile: ReadonlyMap<string, readonly ParsedObject[]>) =>
  new Map([...byFile].filter(([, os]) => os.length > 0).map(([file, os]) => [file, os.map((o) => o.identity)]));

test('deciding the changed files alone serves what deciding the whole read serves', (t) => {
  let fastPaths = 0;
  fc.assert(
    fc.property(folder, fc.array(fc.tuple(fc.subarray([0, 1, 2, 3], { minLength: 1 }), folder), { minLength: 1, maxLength: 6 }), (start, changes) => {
      const alone = new LastKnownGood();
      const whole = new LastKnownGood();
      let state: FileSpec[] = [...start];
      let current = resolveAll(alone, state);
      resolveAll(whole, state);
      let servedAlone = new Map(current.byFile);
      for (const [which, next] of changes) {
        const reads = new Map<string, FileReread | undefined>();
        state = state.map((f, i) => (which.includes(i) ? next[i] : f));
        for (const i of which) reads.set(FILES[i]!, state[i] === undefined ? undefined : reread(FILES[i]!, state[i]!));
        const expected = resolveAll(whole, state);
        const decided = alone.resolveFiles(reads);
        if (decided === undefined) {
          // Declined: the whole read decides, from what the files decided alone left behind.
          current = resolveAll(alone, state);
          servedAlone = new Map(current.byFile);
          deepStrictEqual(served(servedAlone), served(expected.byFile));
          deepStrictEqual(current.errors.map(String), expected.errors.map(String));
          continue;
        }
        fastPaths++;
        for (const [file, objects] of decided.byFile) servedAlone.set(file, objects);
        strictEqual(expected.errors.length, 0);
        deepStrictEqual(served(servedAlone), served(expected.byFile));
        deepStrictEqual(alone.warnings().map(String), expected.warnings.map(String));
        // The very objects, not only their identities.
        for (const [file, objects] of expected.byFile) for (const [k, o] of objects.entries()) strictEqual(servedAlone.get(file)?.[k], o);
      }
    }),
    { numRuns: 400, seed: 1234 },
  );
  t.true(fastPaths > 100, `only ${fastPaths} changes were decided alone`);
});

test('it declines while the last decision kept an object, and when a file is emptied', (t) => {
  const lkg = new LastKnownGood();
  const valid: FileSpec = { objects: [{ what: 'valid', name: 'x', port: 80 }], broken: false };
  const invalid: FileSpec = { objects: [{ what: 'invalid', name: 'x', port: 80 }], broken: false };
  resolveAll(lkg, [valid, undefined, undefined, undefined]);
  t.is(lkg.resolveFiles(new Map([['a.json', { objects: [], errors: [] }]])), undefined, 'emptied');
  t.not(lkg.resolveFiles(new Map([['b.json', reread('b.json', { objects: [{ what: 'valid', name: 'y', port: 80 }], broken: false })]])), undefined);
  resolveAll(lkg, [invalid, undefined, undefined, undefined]);
  t.is(lkg.resolveFiles(new Map([['b.json', reread('b.json', { objects: [{ what: 'valid', name: 'y', port: 80 }], broken: false })]])), undefined, 'kept');
});
