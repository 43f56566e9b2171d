/**
 * Quoting user-supplied text (names, values, file names) for one-line error
 * messages and terminals. JSON.stringify alone escapes C0 controls and lone
 * surrogates but leaves C1 controls (U+0080-U+009F, e.g. U+009B, an escape
 * sequence introducer on some terminals), line and paragraph separators,
 * bidi overrides and other invisible format characters as they are; these
 * functions escape them too, as `\uXXXX`, so the output is still valid JSON.
 */

/**
 * Characters that are not printable: controls (Cc), format characters such
 * as bidi overrides and zero-width spaces (Cf), line and paragraph
 * separators (Zl, Zp), private-use (Co), unassigned (Cn) and lone
 * surrogates (Cs).
 */
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}]/u;
const NON_PRINTABLE_ALL = new RegExp(NON_PRINTABLE.source, 'gu');

/** True when `s` holds a character that is not printable (see the module comment). */
export function hasNonPrintable(s: string): boolean {
  return NON_PRINTABLE.test(s);
}

/** Replace every non-printable character of `s` by its `\uXXXX` escape (two for a character above U+FFFF). */
export function escapeNonPrintable(s: string): string {
  return s.replace(NON_PRINTABLE_ALL, (c) => {
    let out = '';
    for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}

/**
 * `s` JSON-quoted with every non-printable character escaped, cut to `max`
 * characters (then "..." is appended inside the quotes).
 */
export function quote(s: string, max = 80): string {
  return escapeNonPrintable(JSON.stringify(s.length > max ? `${s.slice(0, max)}...` : s));
}
