/**
 * `drover chains --mode nftables` (src/modes/nftables/chains.ts) on the
 * table a full sync of the packet-flow state writes (test/support/nft-table.ts):
 * the frontends of a service port named by --source, their sets, slots,
 * hairpin entries, affinity and firewall ranges, exactly.
 */
import test from 'ava';
import { desiredNft } from '../../src/modes/nftables/desired.ts';
import { formatNftChains, nftFrontendViews } from '../../src/modes/nftables/chains.ts';
import { selectServicePorts, UnknownServiceError } from '../../src/modes/shared/kube-chains/chains.ts';
import type { LiveTable } from '../../src/modes/nftables/live.ts';
import { CLUSTER_CIDR, NODE_IP, STATE } from '../support/packet-flow.ts';
import { plannedTable } from '../support/nft-table.ts';

const live = plannedTable(STATE, { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, [NODE_IP]);
const desired = desiredNft(STATE, { nodePortIPs: [NODE_IP] });

const text = (table: LiveTable, selector: string): string => formatNftChains(selectServicePorts(nftFrontendViews(table, desired), selector, 'in --source'), true);

/** `live` with the elements of set or map `name` changed by `edit`. */
function edited(table: LiveTable, name: string, edit: (e: Map<string, string | undefined>) => void): LiveTable {
  const sets = new Map(table.sets);
  const elements = new Map(table.sets.get(name)!.elements);
  edit(elements);
  sets.set(name, { ...table.sets.get(name)!, elements });
  return { ...table, sets };
}

test('an externalTrafficPolicy Local service port: its ClusterIP and its NodePort, with both selections', (t) => {
  t.is(
    text(live, 'default/local'),
    `# default/local:http (frontend 10.96.0.11 . tcp . 80)
  sets: service-ips, cluster-ips, endpoint-count-2
  endpoints (endpoint-count-2):
    slot  endpoint           hairpin
    0     10.244.1.2 . 8080  10.244.1.2 . 10.244.1.2 . tcp . 8080
    1     10.244.1.4 . 8080  10.244.1.4 . 10.244.1.4 . tcp . 8080
  as --source wants it

# default/local:http (frontend 192.168.100.1 . tcp . 30081)
  sets: service-ips, external-local, endpoint-count-2, local-endpoint-count-1
  endpoints (endpoint-count-2):
    slot  endpoint           hairpin
    0     10.244.1.2 . 8080  10.244.1.2 . 10.244.1.2 . tcp . 8080
    1     10.244.1.4 . 8080  10.244.1.4 . 10.244.1.4 . tcp . 8080
  local-endpoints (local-endpoint-count-1):
    slot  endpoint           hairpin
    0     10.244.1.2 . 8080  10.244.1.2 . 10.244.1.2 . tcp . 8080
  as --source wants it
`,
  );
});

test('ClientIP affinity with an entry, an empty slot and a missing hairpin entry; what a full sync would write', (t) => {
  let table = edited(live, 'affinity', (e) => e.set('192.168.100.2 . 10.96.0.14 . tcp . 80', '10.244.1.3 . 8080'));
  table = edited(table, 'endpoints', (e) => e.delete('10.96.0.14 . tcp . 80 . 2'));
  table = edited(table, 'hairpin', (e) => e.delete('10.244.1.2 . 10.244.1.2 . tcp . 8080'));
  t.is(
    text(table, 'default/sticky:http'),
    `# default/sticky:http (frontend 10.96.0.14 . tcp . 80)
  sets: service-ips, cluster-ips, affinity-2, endpoint-count-3
  endpoints (endpoint-count-3):
    slot  endpoint                                     hairpin
    0     10.244.1.2 . 8080                            10.244.1.2 . 10.244.1.2 . tcp . 8080 (missing)
    1     10.244.1.3 . 8080                            10.244.1.3 . 10.244.1.3 . tcp . 8080
    2     (empty: that draw goes on to the next rule)
  affinity: ClientIP, 2 s; entries: 192.168.100.2 -> 10.244.1.3 . 8080
  a full sync would write: add endpoints 10.96.0.14 . tcp . 80 . 2 : 10.244.1.4 . 8080

# default/sticky:http (frontend 192.168.100.1 . tcp . 30084)
  sets: service-ips, external-ips, affinity-2, endpoint-count-3
  endpoints (endpoint-count-3):
    slot  endpoint           hairpin
    0     10.244.1.2 . 8080  10.244.1.2 . 10.244.1.2 . tcp . 8080 (missing)
    1     10.244.1.3 . 8080  10.244.1.3 . 10.244.1.3 . tcp . 8080
    2     10.244.1.4 . 8080  10.244.1.4 . 10.244.1.4 . tcp . 8080
  affinity: ClientIP, 2 s; entries: none
  as --source wants it
`,
  );
});

test('without --source: frontends by address, the firewall ranges of a LoadBalancer IP, a frontend without endpoints', (t) => {
  const views = nftFrontendViews(live);
  t.true(views.every((v) => v.servicePort === null && v.pending === undefined));
  const out = formatNftChains(views.filter((v) => ['198.51.100.10 . tcp . 80', '10.96.0.13 . tcp . 80'].includes(v.frontend)), false);
  t.is(
    out,
    `(no --source: table ip drover keeps no service names, so frontends are listed by address)

# 10.96.0.13 . tcp . 80
  sets: no-endpoints
  no endpoint slots

# 198.51.100.10 . tcp . 80
  sets: service-ips, external-ips, firewall, endpoint-count-3
  endpoints (endpoint-count-3):
    slot  endpoint           hairpin
    0     10.244.1.2 . 8080  10.244.1.2 . 10.244.1.2 . tcp . 8080
    1     10.244.1.3 . 8080  10.244.1.3 . 10.244.1.3 . tcp . 8080
    2     10.244.1.4 . 8080  10.244.1.4 . 10.244.1.4 . tcp . 8080
  firewall-allow: 192.168.100.0/24, 198.51.100.10
`,
  );
});

test('selectors as in iptables mode: a whole service, one port, or an error naming --source', (t) => {
  const views = nftFrontendViews(live, desired);
  t.deepEqual([...new Set(selectServicePorts(views, 'default/web', 'in --source').map((v) => v.frontend))].length, 4);
  t.is(selectServicePorts(views, 'default/itp:http', 'in --source').length, 1);
  t.throws(() => selectServicePorts(views, 'default/nope', 'in --source'), { instanceOf: UnknownServiceError, message: 'no rules for service default/nope in --source' });
  // A frontend the table has but the source does not want: unnamed, and a full sync would delete it.
  const extra = nftFrontendViews(live, desiredNft({ ...STATE, services: new Map([...STATE.services].filter(([k]) => k !== 'default/itp:http')) }, { nodePortIPs: [NODE_IP] }));
  const stray = extra.find((v) => v.frontend === '10.96.0.15 . tcp . 80')!;
  t.is(stray.servicePort, null);
  t.true(stray.pending!.length > 0 && stray.pending!.every((o) => o.op === 'delete'));
});
