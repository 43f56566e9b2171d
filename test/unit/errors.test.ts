import test from 'ava';
import { DroverError, describeOrigin, fileOrigin } from '../../src/errors.ts';
import { ManifestError, objectError } from '../../src/model/errors.ts';

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
