// `npm run test:scale`: the cases that exist to show behaviour at scale
// (100,000 objects and more), kept out of `npm test` for its time. The same
// settings as the "ava" section of package.json, over test/scale/ only.
import { readFileSync } from 'node:fs';

const { ava } = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));

// Two files at a time: each is CPU- and memory-bound.
export default { ...ava, files: ['test/scale/**/*.test.ts'], timeout: '10m', concurrency: 2 };
