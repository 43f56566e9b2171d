import { DroverError } from '../errors.ts';

/** A command's one-line error for the user (a flag, a missing namespace, no root); program.ts prints it and exits 1. */
export class UsageError extends DroverError {
  override name = 'UsageError';
}
