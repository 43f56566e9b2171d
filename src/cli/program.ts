/**
 * drover's command line (commander): run, sync, render, cleanup, and the
 * read-only chains, diff, status and trace.
 * Errors are one line on stderr, `drover: <message>`, and exit code 1; the
 * exit codes of every command are those of exit.ts.
 */
import { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { benchCommand } from './bench.ts';
import { chainsCommand } from './chains.ts';
import { cleanupCommand } from './cleanup.ts';
import { diffCommand } from './diff.ts';
import { prepareCommandLine } from './command-line.ts';
import { EXIT_HELP } from './exit.ts';
import { applyLogOptions } from './log-options.ts';
import { renderCommand } from './render.ts';
import { runCommand } from './run.ts';
import { statusCommand } from './status.ts';
import { syncCommand } from './sync.ts';
import { traceCommand } from './trace.ts';
import { takeoverCommand } from './takeover.ts';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** The whole program, for main() and for tests of --help. */
export function buildProgram(): Command {
  const output = { outputError: (str: string, write: (s: string) => void) => write(str.replace(/^error: /, 'drover: ')) };
  const program = new Command('drover')
    .description('A node-level service proxy for Linux: Kubernetes-style Services to kernel load-balancing rules')
    .version(pkg.version)
    .configureOutput(output)
    .addHelpText('after', EXIT_HELP)
    .hook('preAction', (_program, action) => applyLogOptions(action));
  for (const cmd of [runCommand(), syncCommand(), renderCommand(), cleanupCommand(), chainsCommand(), diffCommand(), statusCommand(), traceCommand(), takeoverCommand()]) {
    program.addCommand(cmd.configureOutput(output).addHelpText('after', EXIT_HELP));
  }
  program.addCommand(benchCommand().configureOutput(output).addHelpText('after', EXIT_HELP));
  return program;
}

/** Run the program on `argv`; never throws: errors become one line and exit code 1. */
export async function main(argv: readonly string[] = process.argv): Promise<void> {
  // A reader that goes away (`drover render | head`) is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  try {
    const program = buildProgram();
    await program.parseAsync(prepareCommandLine(program, argv, (line) => process.stderr.write(`${line}\n`)));
  } catch (err) {
    process.stderr.write(`drover: ${(err as Error).message}\n`);
    if (process.env.DROVER_STACK) process.stderr.write(`${(err as Error).stack}\n`);
    process.exitCode = 1;
  }
}
