/**
 * Rendered text kept in one piece. V8 holds a string built with `+` or a
 * template literal as a tree of its parts (a rope) until it is first read
 * character by character, and such a tree takes about twice the memory of
 * the text itself: a rendered iptables rule of about 110 characters takes
 * some 340 bytes as a tree and 170 as one piece. Reading one character
 * makes V8 copy the text into one piece and drop the tree at the next
 * collection. The text itself never changes.
 */

/** `text`, made one piece in memory (see the module comment); returns it. */
export function flatString(text: string): string {
  text.charCodeAt(0);
  return text;
}

/** Every string of `texts` made one piece in memory ({@link flatString}); returns `texts`. */
export function flatStrings<T extends readonly string[]>(texts: T): T {
  for (const text of texts) text.charCodeAt(0);
  return texts;
}
