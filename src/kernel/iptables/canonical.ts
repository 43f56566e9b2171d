/**
 * The few places where the text drover renders differs from what
 * iptables-save prints for the same rule, and the mapping between them.
 *
 * drover renders rules in iptables-save's own option order, so the only
 * difference left is `--probability`: drover prints 10 decimals like
 * kube-proxy (`%0.10f`), while the kernel keeps the probability as a 31-bit
 * fraction and iptables-save prints that back with 11 decimals
 * (iptables extensions/libxt_statistic.c: `lround(0x80000000 * p)` on parse,
 * `%.11f` of `probability / 0x80000000` on save); and the nfacct match,
 * which drover renders as kube-proxy writes it, `--nfacct-name NAME`, and
 * iptables-save prints with two spaces, `--nfacct-name  NAME` (iptables
 * extensions/libxt_nfacct.c prints the option with a trailing space, then
 * xtables_save_string a leading one).
 */

const PROBABILITY = /--probability (\d+(?:\.\d+)?)/g;
const SCALE = 0x80000000;
const NFACCT_NAME = /--nfacct-name +(?=\S)/g;

/** The value iptables-save prints for a `--probability` argument. */
export function savedProbability(text: string): string {
  return (Math.round(SCALE * Number(text)) / SCALE).toFixed(11);
}

/**
 * A rule in the form iptables-save prints it back. Idempotent: applying it to
 * iptables-save output returns the same text.
 */
export function canonicalRule(rule: string): string {
  return rule.replace(PROBABILITY, (_, p: string) => `--probability ${savedProbability(p)}`).replace(NFACCT_NAME, '--nfacct-name  ');
}
