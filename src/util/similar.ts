/**
 * "Did you mean …?" for a name that is not known: the known name closest to
 * it by edit distance (optimal string alignment: insertions, deletions,
 * substitutions and transpositions of neighbours each cost 1).
 */

/** The edit distance between `a` and `b` (see the module comment). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `word` (case-insensitively), when it is close
 * enough to be a likely typo: at most a third of the word's length away,
 * and at least one edit. Ties go to the first candidate.
 * @returns the candidate, or undefined when none is close
 */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.max(1, Math.floor(word.length / 3));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d <= limit && d < bestDistance && c !== word) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}
