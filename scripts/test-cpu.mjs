// CPU per test file of an ava run: given to every Node.js process with
// --import, it acts in ava's workers only, and when one exits appends a JSON
// line to $DROVER_TEST_CPU: the test file, the worker's own user and system
// CPU and that of the children it waited for (the `drover` commands,
// helpers, iptables, nft, the API server), from /proc/self/stat, and its
// wall time. Run as a script, it prints the table of such a file.
//
//   DROVER_TEST_CPU=/tmp/cpu.jsonl NODE_OPTIONS=--import=$PWD/scripts/test-cpu.mjs npm test
//   node scripts/test-cpu.mjs /tmp/cpu.jsonl [ROWS]
//
// A child that is not waited for (started detached and left running) is not
// counted; a worker that is killed counts what it had until then.
import { appendFileSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** This process's CPU, and that of the children it waited for, in seconds (clock ticks of 1/100 s). */
function cpu() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const [user, system, childUser, childSystem] = [f[11], f[12], f[13], f[14]].map((x) => Number(x) / 100);
  return { user, system, childUser, childSystem };
}

/** Record this ava worker's CPU in `out` when it exits. */
function recordWorker(out) {
  let file = '?';
  const onOptions = (m) => {
    if (m?.ava?.type !== 'options') return;
    file = m.ava.options.file;
    process.off('message', onOptions);
  };
  process.on('message', onOptions);
  let done = false;
  const write = () => {
    if (done) return;
    done = true;
    appendFileSync(out, JSON.stringify({ file, ...cpu(), wall: process.uptime() }) + '\n');
  };
  process.on('exit', write);
  process.once('SIGTERM', () => {
    write();
    process.kill(process.pid, 'SIGTERM');
  });
}

/** Print the `rows` costliest files of `path` as a Markdown table. */
function table(path, rows) {
  const all = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const files = all.map((r) => ({
    file: r.file.replace(/.*\/test\//, '').replace(/\.test\.js$/, ''),
    self: r.user + r.system,
    children: r.childUser + r.childSystem,
    wall: r.wall,
  }));
  files.sort((a, b) => b.self + b.children - (a.self + a.children));
  const total = files.reduce((s, r) => s + r.self + r.children, 0);
  console.log(`${files.length} files, ${total.toFixed(1)} s of CPU\n`);
  console.log('| File | CPU s | worker | children | wall s |\n| --- | --- | --- | --- | --- |');
  for (const r of files.slice(0, rows)) {
    console.log(`| ${r.file} | ${(r.self + r.children).toFixed(1)} | ${r.self.toFixed(1)} | ${r.children.toFixed(1)} | ${r.wall.toFixed(0)} |`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) {
    console.error('usage: node scripts/test-cpu.mjs FILE [ROWS]');
    process.exit(1);
  }
  table(process.argv[2], Number(process.argv[3] ?? 25));
} else if (process.env.DROVER_TEST_CPU && process.send && /ava[/\\]lib[/\\]worker[/\\]base\.js$/.test(process.argv[1] ?? '')) {
  recordWorker(process.env.DROVER_TEST_CPU);
}
