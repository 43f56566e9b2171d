/**
 * Checks the relative links of drover's documentation: README.md, every
 * Markdown page under docs/ and the README of each mode folder
 * (src/modes/<mode>/README.md).
 *
 * A link fails when its file or folder does not exist, or when its `#anchor`
 * names no heading (and no `<a id="…">`) of the Markdown page it points to.
 * Anchors are the ones GitHub renders: a heading's text, lower-cased, with
 * punctuation removed and spaces turned into hyphens, and `-1`, `-2`, … added
 * to repeats (github-slugger). Links inside fenced code blocks and code spans
 * are not links and are not checked; absolute URLs (`https:`, `mailto:`) are
 * not followed.
 *
 *   npx tsx scripts/check-doc-links.ts [ROOT]   # default: the repository
 *
 * Prints one line per broken link, `FILE:LINE: TARGET: why`, and exits 1 when
 * there is one, else prints how many links it checked and exits 0.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** One link found in a Markdown file. */
export interface DocLink {
  /** The file the link is in, relative to the root, with `/` separators. */
  file: string;
  /** 1-based line of the link. */
  line: number;
  /** The link target as written: `path`, `path#anchor` or `#anchor`. */
  target: string;
}

/** A link that does not resolve, with the reason. */
export interface BrokenLink extends DocLink {
  reason: string;
}

/**
 * The anchor GitHub gives a heading (github-slugger's algorithm): the
 * rendered text lower-cased, every character that is not a letter, a mark, a
 * digit, a connector (`_`), a hyphen or a space removed, spaces made hyphens.
 * @param heading the heading's Markdown text, without its leading `#`s.
 */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link renders as its text
    .replace(/<[^>]+>/g, ''); // inline HTML renders nothing of its tags
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/**
 * The lines of a Markdown text with fenced code blocks blanked (so that
 * neither headings nor links are read from them); line numbers are kept.
 */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence === undefined) {
      if (m) {
        fence = m[1]!;
        return '';
      }
      return line;
    }
    if (m && m[1]!.startsWith(fence[0]!) && m[1]!.length >= fence.length && line.trim() === m[1]) fence = undefined;
    return '';
  });
}

/**
 * Every anchor a Markdown text defines: one per ATX heading (`#` to
 * `######`), repeats numbered as GitHub numbers them, and every
 * `<a id="…">` or `<a name="…">`.
 */
export function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const h = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const a of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(a[1]!);
  }
  return anchors;
}

/**
 * Every inline link and image of a Markdown text (`[text](target)`,
 * `![alt](target)`), outside fenced code blocks and code spans. A title after
 * the target (`(target "title")`) and angle brackets (`(<target>)`) are
 * dropped.
 * @param file the name the links are reported under.
 */
export function linksOf(file: string, text: string): DocLink[] {
  const links: DocLink[] = [];
  proseLines(text).forEach((raw, i) => {
    const line = raw.replace(/(`+)(?:(?!\1).)+?\1/g, (s) => ' '.repeat(s.length));
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ file, line: i + 1, target: m[1]! });
    }
  });
  return links;
}

/** The Markdown files the check covers, relative to `root`: README.md, docs/**\/*.md, src/modes/*\/README.md. */
export function docFiles(root: string): string[] {
  const files: string[] = [];
  if (existsSync(join(root, 'README.md'))) files.push('README.md');
  const walk = (dir: string): void => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(path);
      else if (e.isFile() && e.name.endsWith('.md')) files.push(path);
    }
  };
  if (existsSync(join(root, 'docs'))) walk('docs');
  const modes = join(root, 'src', 'modes');
  if (existsSync(modes)) {
    for (const m of readdirSync(modes).sort()) {
      if (existsSync(join(modes, m, 'README.md'))) files.push(`src/modes/${m}/README.md`);
    }
  }
  return files;
}

/**
 * Checks every relative link of the files {@link docFiles} lists under `root`.
 * @returns the broken links (empty when all resolve) and how many links were checked.
 */
export function checkDocLinks(root: string): { broken: BrokenLink[]; checked: number } {
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (abs: string): Set<string> => {
    let a = anchorCache.get(abs);
    if (a === undefined) {
      a = anchorsOf(readFileSync(abs, 'utf8'));
      anchorCache.set(abs, a);
    }
    return a;
  };
  const broken: BrokenLink[] = [];
  let checked = 0;
  for (const file of docFiles(root)) {
    for (const link of linksOf(file, readFileSync(join(root, file), 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue; // https:, mailto:, …
      checked++;
      const hash = link.target.indexOf('#');
      const path = hash === -1 ? link.target : link.target.slice(0, hash);
      const anchor = hash === -1 ? undefined : decodeURIComponent(link.target.slice(hash + 1));
      const abs = path === '' ? join(root, file) : resolve(root, dirname(file), decodeURIComponent(path));
      if (relative(root, abs).startsWith('..')) {
        broken.push({ ...link, reason: 'points outside the repository' });
        continue;
      }
      if (!existsSync(abs)) {
        broken.push({ ...link, reason: `no such file or folder: ${relative(root, abs)}` });
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (!statSync(abs).isFile() || !abs.endsWith('.md')) {
        broken.push({ ...link, reason: 'an anchor into a file that is not a Markdown page' });
        continue;
      }
      if (!anchors(abs).has(anchor)) broken.push({ ...link, reason: `no heading with anchor #${anchor} in ${relative(root, abs)}` });
    }
  }
  return { broken, checked };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const root = resolve(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
  const { broken, checked } = checkDocLinks(root);
  for (const b of broken) console.error(`${b.file}:${b.line}: ${b.target}: ${b.reason}`);
  if (broken.length > 0) {
    console.error(`${broken.length} broken of ${checked} relative links`);
    process.exit(1);
  }
  console.log(`${checked} relative links checked, none broken`);
}
