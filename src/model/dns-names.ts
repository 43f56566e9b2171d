/**
 * The two fields only DNS reads (for the Services of types.ts
 * DnsOnlyService), `spec.externalName` of a Service and `hostname` of an
 * endpoint, read from the raw object by parse.ts beside the schemas (no
 * proxy rule depends on them, so a bad one never makes its object
 * invalid), each checked as the API server checks it, so that nothing
 * unvalidated reaches a DNS record.
 */
import { checkDNSLabel, checkDNSSubdomain } from './validate.ts';

/**
 * `spec.externalName` as the API server validates it (core/v1
 * ValidateService: one trailing dot dropped, then a DNS-1123 subdomain of
 * at most 253 characters), lower-cased: `{ name }`, or `{ problem }` saying
 * what is wrong with it.
 */
export function readExternalName(value: unknown): { readonly name: string } | { readonly problem: string } {
  if (value === undefined || value === null || value === '') return { problem: 'required for a Service of type ExternalName' };
  if (typeof value !== 'string') return { problem: 'expected a string' };
  const name = (value.endsWith('.') ? value.slice(0, -1) : value).toLowerCase();
  const problem = checkDNSSubdomain(name);
  return problem === undefined ? { name } : { problem };
}

/**
 * An endpoint's `hostname` (discovery.k8s.io/v1 Endpoint, core/v1
 * EndpointAddress), which the API server holds to a DNS-1123 label:
 * `{ hostname }`, `{}` when there is none, or `{ problem }`.
 */
export function readHostname(value: unknown): { readonly hostname?: string } | { readonly problem: string } {
  if (value === undefined || value === null || value === '') return {};
  if (typeof value !== 'string') return { problem: 'expected a string' };
  const problem = checkDNSLabel(value);
  return problem === undefined ? { hostname: value } : { problem };
}
