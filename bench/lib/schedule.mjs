// Interleaving: the machines are shared and drift over seconds, so no peer ever runs all of
// its samples in one stretch. Each round gives every peer one sample; rounds alternate
// direction (A B C D, then D C B A, ...) so no peer is always first or always last.

/** Peer order for round r (0-based). */
export function roundOrder(peers, r) {
  return r % 2 === 0 ? [...peers] : [...peers].reverse();
}

/**
 * The full plan for one case: `warmup` rounds (discarded) then `iterations` measured rounds.
 * Returns [{ round, peer, warm, index }]; `index` is the sample's identity (same for every
 * peer in a round, negative for warm-ups) and seeds the sample's parameters, so all peers
 * run exactly the same queries in the same round.
 */
export function interleave(peers, iterations, warmup = 0) {
  const plan = [];
  const total = warmup + iterations;
  for (let r = 0; r < total; r++) {
    const warm = r < warmup;
    const index = warm ? -(r + 1) : r - warmup;
    for (const peer of roundOrder(peers, r)) plan.push({ round: r, peer, warm, index });
  }
  return plan;
}

/** Iteration and warm-up counts for a case in the given mode. */
export function counts(caseDef, quick) {
  const pick = (v, dflt) => (Array.isArray(v) ? v[quick ? 1 : 0] : v ?? dflt);
  return { iterations: pick(caseDef.iters, quick ? 5 : 30), warmup: pick(caseDef.warm, quick ? 1 : 3) };
}

/**
 * Peers that still need warm-up in round r (alternating order like measured rounds): fewer
 * than `minCount` warm samples, or less than `minMs` of work so far. spent: { peer: { n, ms } }.
 */
export function warmupRound(peers, round, spent, { minCount, minMs }) {
  return roundOrder(peers, round).filter((p) => spent[p].n < minCount || spent[p].ms < minMs);
}
