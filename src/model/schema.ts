/**
 * Small zod building blocks shared by the Kubernetes and Shepherd schemas:
 * a validated string, a defaulted optional, the Service port-set rules, and
 * running a schema so that its first problem comes out as a field path plus
 * a one-line description (what ManifestError wants).
 */
import { z } from 'zod';
import { quote } from './quote.ts';
import type { Protocol } from './types.ts';
import { asciiUpperCase, checkLabelKey, checkLabelValue, checkPort, checkProtocol, type Check } from './validate.ts';

/** True for what a zod object schema accepts: an object that is not null and not an array. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A string schema that must pass `check` (validate.ts); the check's text becomes the issue message. */
export function validated(check: Check<string>) {
  return z.string().superRefine((value, ctx) => {
    const problem = check(value);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  });
}

/** A number schema for a port, 1-65535 integer. */
export const portSchema = z.number().superRefine((value, ctx) => {
  const problem = checkPort(value);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

/**
 * A protocol schema: checked with validate.ts `checkProtocol`, output
 * upper-case (ASCII only); absent or null means TCP (the Kubernetes API default).
 */
export function protocolSchema(opts: { ignoreCase: boolean }) {
  return withDefault(
    validated((s) => checkProtocol(s, opts)).transform((s) => asciiUpperCase(s) as Protocol),
    'TCP' as Protocol,
  );
}

/**
 * Make `schema` optional and nullable (kubectl prints `null` for empty
 * fields), replacing a missing value by `fallback` (API defaulting).
 */
export function withDefault<S extends z.ZodType, D extends z.output<S>>(schema: S, fallback: D) {
  return schema.nullish().transform((v): z.output<S> => (v === undefined || v === null ? fallback : v));
}

/** Make `schema` optional and nullable, mapping null to undefined. */
export function optional<S extends z.ZodType>(schema: S) {
  return schema.nullish().transform((v): z.output<S> | undefined => (v === null ? undefined : v));
}

/**
 * A label map or a selector (`metadata.labels`, `spec.selector`): an
 * object of label keys to label values (validate.ts `checkLabelKey`,
 * `checkLabelValue`), read as a Map in manifest order; absent or null is
 * an empty map. Anything else fails at its field, e.g.
 * `spec.selector: expected a map of strings, got a list` or
 * `spec.selector.app: expected string, got number 1`.
 */
export const labelMapSchema = withDefault(
  z.record(validated(checkLabelKey), validated(checkLabelValue), {
    error: (issue) => (issue.code === 'invalid_type' ? `expected a map of strings, got ${describeInput(issue.input)}` : undefined),
  }),
  {},
).transform(
  (o): ReadonlyMap<string, string> => new Map(Object.entries(o)),
);

/**
 * The rules of a Service's `ports` list (pkg/apis/core/validation
 * validateServicePort): with more than one port every port needs a name;
 * names are unique; port+protocol pairs are unique. Reports issues at
 * `[i].name` / `[i].port`, naming the first port with the same value. For
 * use in `.superRefine` on the ports array. Linear in the number of ports.
 */
export function refineServicePorts(
  ports: ReadonlyArray<{ name: string; port: number; protocol: Protocol }>,
  ctx: z.RefinementCtx,
): void {
  if (ports.length <= 1) return; // a lone port breaks none of these rules
  // The first port of each name and of each port/protocol pair.
  const byName = new Map<string, number>();
  const byPort = new Map<string, number>();
  ports.forEach((p, i) => {
    if (!byName.has(p.name)) byName.set(p.name, i);
    if (!byPort.has(`${p.port}/${p.protocol}`)) byPort.set(`${p.port}/${p.protocol}`, i);
  });
  ports.forEach((p, i) => {
    if (ports.length > 1 && p.name === '') {
      ctx.addIssue({ code: 'custom', path: [i, 'name'], message: 'a name is required when the Service has more than one port' });
      return;
    }
    const sameName = byName.get(p.name)!;
    if (p.name !== '' && sameName < i) {
      ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate port name ${JSON.stringify(p.name)} (same as port ${sameName})` });
    }
    const samePort = byPort.get(`${p.port}/${p.protocol}`)!;
    if (samePort < i) {
      ctx.addIssue({ code: 'custom', path: [i, 'port'], message: `duplicate port ${p.port}/${p.protocol} (same as port ${samePort})` });
    }
  });
}

/**
 * True when `refine` (a `.superRefine` function, such as
 * {@link refineServicePorts}) raises no issue on `value`: for checking an
 * output built without zod by the very rules its schema applies. `refine`
 * may only call `ctx.addIssue`.
 */
export function passesRefinement<T>(refine: (value: T, ctx: z.RefinementCtx) => void, value: T): boolean {
  const ctx = new IssueCount();
  refine(value, ctx as unknown as z.RefinementCtx);
  return ctx.issues === 0;
}

/** The part of a zod refinement context {@link passesRefinement} needs: a count of the issues raised. */
class IssueCount {
  issues = 0;
  addIssue(): void {
    this.issues++;
  }
}

/** Render a zod issue path as "spec.ports[0].port" / 'metadata.labels["kubernetes.io/service-name"]'. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_$][\w$]*$/.test(key)) out += out === '' ? key : `.${key}`;
    else out += `[${quote(String(key), Infinity)}]`;
  }
  return out;
}

/** Describe a received value for a type mismatch: `string "80"`, `null`, `array`, `number 8`. */
function describeInput(input: unknown): string {
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'a list';
  if (typeof input === 'object') return 'an object';
  if (typeof input === 'string') return `string ${quote(input, 40)}`;
  return `${typeof input} ${String(input)}`;
}

/** Per-parse zod error map: "required" for missing values, "expected X, got Y" for wrong types. */
const errorMap: z.core.$ZodErrorMap = (issue) => {
  if (issue.code === 'invalid_type') {
    return issue.input === undefined ? 'required' : `expected ${issue.expected}, got ${describeInput(issue.input)}`;
  }
  return undefined;
};

/** Outcome of {@link parseWith}: the data, or the first problem as a field path and a description. */
export type SchemaResult<T> =
  | { readonly ok: true; readonly data: T }
  | { readonly ok: false; readonly field: string; readonly detail: string };

/**
 * Run `schema` on `raw`. On failure, returns the first issue only (one
 * error line per object), noting how many more there were.
 */
export function parseWith<S extends z.ZodType>(schema: S, raw: unknown): SchemaResult<z.output<S>> {
  const r = schema.safeParse(raw, { error: errorMap });
  if (r.success) return { ok: true, data: r.data };
  const [first, ...rest] = r.error.issues;
  const more = rest.length > 0 ? ` (and ${rest.length} more problem${rest.length > 1 ? 's' : ''})` : '';
  return { ok: false, field: formatPath(first?.path ?? []), detail: `${first?.message ?? 'invalid'}${more}` };
}
