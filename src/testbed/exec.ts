/**
 * The testbed's command runner is the one of the whole tree,
 * kernel/exec.ts ({@link run}: argument arrays only, never a shell,
 * optionally inside a named network namespace); re-exported here for the
 * testbed's and the tests' imports.
 */
export { argvFor, describeCommand, run, type RunOptions, type RunResult } from '../kernel/exec.ts';
