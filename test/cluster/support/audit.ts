/**
 * kube-apiserver's audit log, as the cluster tests' witness of what drover
 * asked the API server for (its lists and watches), from the server's side:
 * a policy that logs, at level Metadata, the list and watch requests of one
 * user, and a reader of the log's events.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** One audit event (audit.k8s.io/v1 Event), the fields the tests read. */
export interface AuditEvent {
  readonly stage: string;
  readonly verb: string;
  readonly requestURI: string;
  readonly user: { readonly username: string };
  readonly objectRef?: { readonly resource?: string };
  readonly responseStatus?: { readonly code?: number };
  readonly stageTimestamp: string;
}

/** Where the audit files of {@link auditFlags} live. */
export interface Audit {
  /** kube-apiserver flags that turn the audit log on. */
  readonly flags: readonly string[];
  /** The events logged so far. */
  events(): Promise<AuditEvent[]>;
}

/**
 * Write a policy logging the list and watch requests of `username` (stages
 * ResponseStarted, for a watch, and ResponseComplete) into `dir`, and
 * return the flags for it; the log is written synchronously (blocking mode)
 * and appended to across restarts.
 */
export async function auditFlags(dir: string, username: string): Promise<Audit> {
  const policy = join(dir, 'audit-policy.yaml');
  const log = join(dir, 'audit.log');
  await writeFile(
    policy,
    [
      'apiVersion: audit.k8s.io/v1',
      'kind: Policy',
      'omitStages: [RequestReceived]',
      'rules:',
      '- level: Metadata',
      `  users: [${JSON.stringify(username)}]`,
      '  verbs: [list, watch]',
      '- level: None',
      '',
    ].join('\n'),
  );
  return {
    flags: [`--audit-policy-file=${policy}`, `--audit-log-path=${log}`, '--audit-log-mode=blocking', '--audit-log-format=json'],
    events: async () =>
      (await readFile(log, 'utf8').catch(() => ''))
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as AuditEvent),
  };
}

/** The `resourceVersion` query parameter of an event's request ('' when absent). */
export function requestedVersion(e: AuditEvent): string {
  return new URL(e.requestURI, 'https://x').searchParams.get('resourceVersion') ?? '';
}
