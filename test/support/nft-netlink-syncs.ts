/**
 * Runs nftables mode's backend with its netlink element writer inside the
 * network namespace this process was started in (a netlink socket acts on
 * the namespace of its process), on the packet-flow state:
 *
 *     ip netns exec NS node --import tsx test/support/nft-netlink-syncs.ts NODE_IP
 *
 * It makes a full sync of STATE, then a partial sync with one endpoint of
 * default/web:http removed, then one that puts it back, and prints the
 * three SyncResults as a JSON array. Exits non-zero when a sync throws.
 */
import { NftablesBackend } from '../../src/modes/nftables/backend.ts';
import { SystemNft } from '../../src/modes/nftables/exec.ts';
import { NetlinkElementWriter } from '../../src/modes/nftables/netlink-writer.ts';
import { NftNetlinkClient } from '../../src/kernel/nftables/client.ts';
import { silentLogger } from '../../src/util/log.ts';
import { CLUSTER_CIDR, STATE } from './packet-flow.ts';

const nodeIP = process.argv[2]!;
const writer = new NetlinkElementWriter(await NftNetlinkClient.open());
const backend = new NftablesBackend({ nft: new SystemNft(), elements: writer, render: { clusterCIDR: CLUSTER_CIDR, masqueradeAll: false }, frontends: { nodePortIPs: [nodeIP] }, logger: silentLogger() });
const web = STATE.services.get('default/web:http')!;
const fewer = { ...STATE, services: new Map([...STATE.services].map(([k, v]) => [k, k === web.key ? { ...web, endpoints: web.endpoints.slice(1) } : v])) };
const changed = { full: false, changed: new Set([web.key]) };
const results = [await backend.sync(STATE, { full: true, changed: new Set() }), await backend.sync(fewer, changed)];
// Time to look at the kernel between the two partial syncs: wait for a line on stdin (the test then closes it).
process.stdout.write(`${JSON.stringify(results.map(({ written, deleted, detail }) => ({ written, deleted, detail })))}\n`);
await new Promise((r) => process.stdin.once('data', r));
const back = await backend.sync(STATE, changed);
process.stdout.write(`${JSON.stringify({ written: back.written, deleted: back.deleted, detail: back.detail })}\n`);
writer.close();
