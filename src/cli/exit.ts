/**
 * drover's exit codes, one rule for every command:
 *
 * | code | meaning |
 * |---|---|
 * | 0 | done; a source, where the command reads one, was read whole |
 * | 1 | failed: the command could not do its job (one line `drover: …` on stderr says why); for `diff`: the kernel differs from desired state |
 * | 2 | `diff` only: the comparison failed (so that 1 can mean "differs", as diff(1)) |
 * | 3 | done, but not all of it: part of the source could not be read and was skipped (a file, a document or an object, each named on stderr) while every other service was served, rendered or compared; or `cleanup` left a chain that a rule drover does not own still uses |
 *
 * Warnings (an entry dropped from an otherwise valid object, an endpoint port
 * matching no service port) are printed but do not change the code.
 */

/** The exit codes of the table above. */
export const EXIT = { ok: 0, failed: 1, diffError: 2, partial: 3 } as const;

/** The text every command's `--help` ends with. */
export const EXIT_HELP = `
Exit codes: 0 done; 1 failed (diff: differences found); 2 diff failed;
3 done, but part of the source could not be read and was skipped (each part
named on stderr), or cleanup left a chain another rule still uses.`;

/**
 * Set the exit code to {@link EXIT.partial} when `left` (what the source
 * could not read, or what cleanup could not remove) is not empty, unless an
 * earlier outcome already set a non-zero code.
 */
export function markPartial(left: readonly unknown[]): void {
  if (left.length > 0 && !process.exitCode) process.exitCode = EXIT.partial;
}
