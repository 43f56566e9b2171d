/**
 * scripts/check-doc-links.ts: GitHub's heading anchors, links outside code,
 * broken files and anchors found, and the repository's own README.md and
 * docs/ pages free of broken relative links.
 */
import test from 'ava';
import { statSync } from 'node:fs';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { anchorsOf, checkDocLinks, linksOf, slug } from '../../scripts/check-doc-links.ts';

test('slug gives the anchors GitHub renders', (t) => {
  t.is(slug('Running against a cluster'), 'running-against-a-cluster');
  t.is(slug('`drover trace --src IP --dst IP:PORT [--proto tcp|udp|sctp]`'), 'drover-trace---src-ip---dst-ipport---proto-tcpudpsctp');
  t.is(slug('What the periodic sync costs (iptables mode)'), 'what-the-periodic-sync-costs-iptables-mode');
  t.is(slug("Against kube-proxy's nftables mode"), 'against-kube-proxys-nftables-mode');
  t.is(slug('At 10,000 services × 10 endpoints'), 'at-10000-services--10-endpoints');
  t.is(slug('See [the bench](docs/bench.md)'), 'see-the-bench');
});

test('anchorsOf numbers repeated headings, reads <a id>, and skips fenced code', (t) => {
  const text = ['# Title', '## Status', '```', '# not a heading', '```', '## Status', 'text <a id="kept"></a>'].join('\n');
  t.deepEqual([...anchorsOf(text)].sort(), ['kept', 'status', 'status-1', 'title']);
});

test('linksOf finds inline links and images, not those in code', (t) => {
  const text = ['[a](x.md#h) and ![i](img.svg "title")', '`[not](a link)`', '```', '[no](link.md)', '```', '[b](<y z.md>)'].join('\n');
  t.deepEqual(
    linksOf('f.md', text).map((l) => [l.line, l.target]),
    [
      [1, 'x.md#h'],
      [1, 'img.svg'],
    ],
  );
});

test('checkDocLinks reports a missing file and a missing anchor, and passes good ones', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'drover-doclinks-'));
  try {
    await mkdir(join(root, 'docs'));
    await writeFile(join(root, 'README.md'), '# R\n## Quick start\n[ok](docs/a.md#part-two) [self](#quick-start) [web](https://example.org/x)\n[gone](docs/none.md) [bad](docs/a.md#nowhere)\n');
    await writeFile(join(root, 'docs', 'a.md'), '# A\n## Part two\n[back](../README.md#r) [folder](../docs)\n');
    const { broken, checked } = checkDocLinks(root);
    t.is(checked, 6);
    t.deepEqual(
      broken.map((b) => `${b.file}:${b.line} ${b.target}`),
      ['README.md:4 docs/none.md', 'README.md:4 docs/a.md#nowhere'],
    );
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test("the repository's README.md and docs/ pages have no broken relative link", (t) => {
  const { broken, checked } = checkDocLinks(fileURLToPath(new URL('../..', import.meta.url)));
  t.true(checked > 100, `${checked} links checked`);
  t.deepEqual(broken.map((b) => `${b.file}:${b.line}: ${b.target}: ${b.reason}`), []);
});

test("the repository's README.md stays a short front door: at most 15,000 bytes, the depth in docs/", (t) => {
  const size = statSync(fileURLToPath(new URL('../../README.md', import.meta.url))).size;
  t.true(size <= 15_000, `README.md is ${size} bytes`);
});
