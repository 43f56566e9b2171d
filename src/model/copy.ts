/**
 * Frozen copies of plain objects for the Snapshot that share V8 hidden
 * classes. An object spread at the start of a literal (`{ ...a, port }`,
 * `{ ...a }`) makes, once its call site has seen several shapes, a hidden
 * class of its own for every object it builds (a map and a descriptor
 * array, about 250 bytes per object: 25 MB for 100,000 endpoints). Copying
 * the properties one by one onto a fresh object follows V8's shared
 * transitions instead, so copies with the same fields share one.
 */

/**
 * A frozen copy of `o`'s own enumerable properties, in their order,
 * followed by those of `extra` (which win, as in `{ ...o, ...extra }`).
 */
export function frozenCopy<T extends object, E extends object = Record<never, never>>(o: T, extra?: E): Readonly<T & E> {
  const out: Record<string, unknown> = {};
  copyOwn(o, out);
  if (extra !== undefined) copyOwn(extra, out);
  return Object.freeze(out) as Readonly<T & E>;
}

/**
 * Copy `from`'s own enumerable string-keyed properties onto `to`, in
 * Object.keys order, without the list Object.keys would make (these copies
 * are made once per endpoint of the Snapshot).
 */
function copyOwn(from: object, to: Record<string, unknown>): void {
  for (const key in from) if (Object.prototype.hasOwnProperty.call(from, key)) to[key] = (from as Record<string, unknown>)[key];
}

/**
 * {@link frozenCopy} with one more property, `key`: `value` (which wins
 * over a property of `o` of that name), without an object to hold it.
 */
export function frozenCopyWith<T extends object, K extends string, V>(o: T, key: K, value: V): Readonly<T & { [P in K]: V }> {
  const out: Record<string, unknown> = {};
  copyOwn(o, out);
  out[key] = value;
  return Object.freeze(out) as Readonly<T & { [P in K]: V }>;
}
