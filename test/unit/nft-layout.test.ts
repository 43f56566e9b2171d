/**
 * nftables mode's layout read back by comments (layout.ts, plan.ts
 * planStructure): every option a rule's text depends on shows in its
 * comment, so a full sync sees the change.
 */
import test from 'ava';
import { layout } from '../../src/modes/nftables/layout.ts';
import { TableModel } from '../../src/modes/nftables/model.ts';
import { planStructure } from '../../src/modes/nftables/plan.ts';

const INPUTS = { counts: { main: [1], local: [1] }, timeouts: [] };

function modelOf(opts: { clusterCIDR?: string; masqueradeAll: boolean }): TableModel {
  const m = new TableModel();
  m.exists = true;
  for (const s of layout(opts, INPUTS).sets) m.types.set(s.name, { keyType: s.keyType, ...(s.mapType !== undefined ? { mapType: s.mapType } : {}) });
  for (const c of layout(opts, INPUTS).chains) m.chains.set(c.name, { ...(c.base ? { base: { ...c.base, policy: 'accept' } } : {}), comments: c.rules.map((r) => r.comment) });
  return m;
}

for (const masqueradeAll of [false, true]) {
  test(`another --cluster-cidr rewrites every chain that holds it (masquerade-all ${masqueradeAll})`, (t) => {
    const before = modelOf({ clusterCIDR: '10.244.0.0/16', masqueradeAll });
    const plan = planStructure(before, layout({ clusterCIDR: '10.245.0.0/16', masqueradeAll }, INPUTS), true);
    const holding = layout({ clusterCIDR: '10.245.0.0/16', masqueradeAll }, INPUTS).chains.filter((c) => c.rules.some((r) => r.text.includes('10.245.0.0/16')));
    t.deepEqual(plan.writeChains.map((c) => c.name), holding.map((c) => c.name));
    t.true(holding.some((c) => c.name === 'external-local'));
  });
}
