// `npm test`'s ava configuration (scripts/test.sh runs ava with it in the
// compiled tree): package.json's "ava", over the .js file scripts/transpile.mjs wrote
// beside each .ts file, started by plain Node.js without tsx.
import { readFileSync } from 'node:fs';

const { ava } = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));
const { extensions: _ts, nodeArguments: _tsx, ...settings } = ava;

// The files that take longest (wall time), longest first: they start first,
// so that with four files at a time none of them is left to run alone at
// the end. Order only; every other file follows in path order.
const FIRST = [
  'cluster/apiserver-restart',
  'kernel/faults-api',
  'cluster/kubernetes-source',
  'cluster/peer-bench',
  'cluster/way-back',
  'kernel/takeover',
  'kernel/nftables',
  'kernel/bench',
  'unit/hostile-input',
  'kernel/cli',
  'kernel/faults',
  'kernel/nft-dualstack',
  'kernel/read-back-faults',
  'kernel/dns',
];
const rank = (file) => {
  const i = FIRST.findIndex((name) => file.endsWith(`/test/${name}.test.js`));
  return i === -1 ? FIRST.length : i;
};

export default {
  ...settings,
  files: ava.files.map((glob) => glob.replace(/\.ts$/, '.js')),
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
};
