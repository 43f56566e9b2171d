/** Errors of the nf_tables netlink codec (pure: raised before anything is sent, or while reading a reply). */
import { DroverError } from '../../errors.ts';
import { NetlinkDecodeError } from '../netlink/nlattr.ts';

/**
 * An input to an encoder is not valid; nothing was encoded. `field` names
 * it, e.g. "table", "elements[3].key[2].port".
 */
export class NftValidationError extends DroverError {
  constructor(
    /** Field path of the bad input. */
    override readonly field: string,
    /** What is wrong, e.g. "70000 is not an integer in 0-65535". */
    readonly detail: string,
  ) {
    super(`invalid nf_tables ${field}: ${detail}`, { field });
    this.name = 'NftValidationError';
  }
}

/** A kernel reply that cannot be read (malformed, a mandatory attribute missing, a layout the codec does not model). */
export class NftDecodeError extends NetlinkDecodeError {
  constructor(message: string) {
    super(`nf_tables reply: ${message}`);
    this.name = 'NftDecodeError';
  }
}
