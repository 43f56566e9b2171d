#!/usr/bin/env node
// drover's executable: the compiled CLI when built (npm run build), else the
// TypeScript sources through tsx. DROVER_ENTRY=dist or DROVER_ENTRY=src
// chooses instead; with dist, a missing build is an error, not a fallback.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/cli/main.js', import.meta.url);
const entry = process.env.DROVER_ENTRY || (existsSync(compiled) ? 'dist' : 'src');
if (entry === 'dist') {
  if (!existsSync(compiled)) {
    process.stderr.write('drover: DROVER_ENTRY=dist, but dist/cli/main.js does not exist: run npm run build\n');
    process.exit(1);
  }
  await import(compiled.href);
} else if (entry === 'src') {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/cli/main.ts', import.meta.url).href);
} else {
  process.stderr.write(`drover: DROVER_ENTRY is ${JSON.stringify(entry)}; use dist (the build in dist/) or src (the TypeScript sources)\n`);
  process.exit(1);
}
