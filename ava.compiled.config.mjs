// `npm test`'s ava configuration (scripts/test.sh runs ava with it in the
// compiled tree): package.json's "ava", over the .js file tsc wrote beside
// each .ts file, started by plain Node.js without tsx.
import { readFileSync } from 'node:fs';

const { ava } = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));
const { extensions: _ts, nodeArguments: _tsx, ...settings } = ava;

export default {
  ...settings,
  files: ava.files.map((glob) => glob.replace(/\.ts$/, '.js')),
};
