/** Shared helpers of the model tests (not a test file itself). */
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { buildSnapshot, type BuildResult } from '../../src/model/normalise.ts';
import { parseObject, type ParseResult } from '../../src/model/parse.ts';
import type { ParsedObject } from '../../src/model/parsed.ts';
import type { ServicePort, Snapshot } from '../../src/model/types.ts';
import { readManifests } from '../../src/sources/manifests.ts';

export const FIXTURES = 'test/fixtures/model';

/** The file name the parse helpers give their objects. */
export const FILE = 'in.yaml';
/** Parse one raw object as object `index` of {@link FILE}. */
export const parse = (raw: unknown, index = 0) => parseObject({ file: FILE, index, raw });

/** The parsed object of an ok result; throws otherwise. */
export function okObject(r: ParseResult) {
  if (r.status !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(r)}`);
  return r.object;
}
/** The message of an error result; throws otherwise. */
export function errorText(r: ParseResult): string {
  if (r.status !== 'error') throw new Error(`expected error, got ${JSON.stringify(r)}`);
  return r.error.message;
}

/** Read, parse and normalise `paths` (no last-known-good): result plus the parse errors and the parse warnings. */
export async function buildFrom(paths: string[], previous?: Snapshot): Promise<BuildResult & { parseErrors: string[]; parseWarnings: string[] }> {
  const objects: ParsedObject[] = [];
  const parseErrors: string[] = [];
  const parseWarnings: string[] = [];
  for (const path of paths) {
    const read = await readManifests(path);
    parseErrors.push(...read.errors.map(String));
    for (const o of read.objects) {
      const r = parseObject(o);
      if (r.status === 'ok') {
        objects.push(r.object);
        parseWarnings.push(...r.warnings.map(String));
      }
      if (r.status === 'error') parseErrors.push(r.error.message);
    }
  }
  return { ...buildSnapshot(objects, { serviceCIDR: '10.96.0.0/12', ...(previous ? { previous } : {}) }), parseErrors, parseWarnings };
}

/** A compact, exact rendering of a service port: "key ip:port/PROTO -> ep ep ..." (ep flags: !r not ready, !s not serving, T terminating). */
export function render(sp: ServicePort): string {
  const eps = sp.endpoints.map((e) => `${e.ip}:${e.port}${e.ready ? '' : '!r'}${e.serving ? '' : '!s'}${e.terminating ? 'T' : ''}`);
  return `${sp.key} ${sp.clusterIP}:${sp.port}/${sp.protocol} -> ${eps.join(' ')}`.trimEnd();
}

export function renderAll(s: Snapshot): string[] {
  return [...s.services.values()].map(render);
}

/** A debug-level pino logger that records every line as a parsed object. */
export function recordingLogger(): { logger: Logger; lines: Array<{ level: number; msg: string } & Record<string, unknown>> } {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

/** A ParseResult in a form two results can be compared in: messages instead of ManifestError objects. */
export function comparable(r: ParseResult): unknown {
  if (r.status === 'ok') return { status: r.status, object: r.object, warnings: r.warnings.map((w) => [w.message, w.field]) };
  if (r.status === 'error') return { status: r.status, error: [r.error.message, r.error.field], identity: r.identity };
  return r;
}
