/**
 * The command runner of the IPVS guest tests (test/vm/), which import it
 * from here: the one command runner of the whole tree, kernel/exec.ts
 * ({@link run}: argument arrays only, never a shell, optionally inside a
 * named network namespace). Everything else imports kernel/exec.ts itself.
 */
export { argvFor, describeCommand, run, type RunOptions, type RunResult } from '../kernel/exec.ts';
