//! Restarts of the decision search over rankings and capacities.
//!
//! One ranking alone is heavy-tailed: a search that has not found a
//! placement after a few thousand nodes often needs millions more, while
//! another ranking (or another capacity) finds one in a few hundred. So
//! the search restarts often, two kinds of probe sharing the nodes:
//!
//! * *bound* probes look for a placement at the lowest height not ruled
//!   out (`proven`, the lower bound at first), MiniMalloc's schedule: each
//!   of the [`Decide`] rankings in turn, with a node limit that starts at
//!   twice the number of buffers and doubles every round. One that exhausts
//!   its tree proves the height impossible and raises `proven`;
//! * *improving* probes look for a placement below the best found, an
//!   eighth, a quarter and a half of the way down to `proven` (the first
//!   under the plain ranking, the others under freshly perturbed ones,
//!   seeded so runs repeat), with half the bound probes' limit, an eighth
//!   after a round in which none found anything, and none once the best is
//!   within 1/64 of `proven`: when the bound is out of reach, many short
//!   tries at varied heights find lower placements where deepening one
//!   fails.
//!
//! The rounds end when the best meets `proven` (it is then optimal) or the
//! node allowance is spent.

use super::budget::{Budget, Outcome};
use super::decide::Decide;
use super::interval::{Buffer, Placement};

/// Runs the rounds over `bufs` (non-trivial, with conflict lists `adj`),
/// improving `best` and raising `proven`, for at most `nodes` nodes.
/// Returns the nodes spent.
pub(crate) fn decide_rounds(
    bufs: &[Buffer],
    adj: &[Vec<u32>],
    best: &mut Placement,
    proven: &mut usize,
    nodes: u64,
    budget: &Budget<'_>,
) -> u64 {
    let mut d = Decide::new(bufs, adj);
    let mut limit = 2 * bufs.len().max(1) as u64;
    // Seeds of the perturbed rankings (a Weyl sequence; each seeds the
    // planner's one generator, `Rng`, inside `Decide`).
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    // Improving probes get half the bound probes' slice while they find
    // something, an eighth after a round in which none did.
    let mut fruitful = true;
    'rounds: loop {
        let share = if fruitful { limit / 2 } else { limit / 8 };
        fruitful = false;
        for h in 0..d.rankings() {
            // The bound probe, then improving probes an eighth, a quarter
            // and a half of the way down, while the best is more than 1/64
            // above the bound (closer, they are as hard as the bound).
            for step in 0..4 {
                if best.height <= *proven || d.nodes >= nodes {
                    break 'rounds;
                }
                let gap = best.height - 1 - *proven;
                if step > 0 && gap < *proven / 64 {
                    break;
                }
                let (cap, slice, key) = if step == 0 {
                    (*proven, limit, (h, 0))
                } else if step == 1 {
                    (best.height - 1 - gap / 8, share, (h, 0))
                } else {
                    seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    (best.height - 1 - gap / (16 >> step), share, (h, seed | 1))
                };
                let run = Budget {
                    max_nodes: d.nodes + slice.min(nodes - d.nodes),
                    stop: budget.stop,
                };
                match d.run(cap, key, &run) {
                    (Outcome::Found, Some(offsets)) => {
                        let height = offsets
                            .iter()
                            .zip(bufs)
                            .map(|(&o, b)| o + b.size)
                            .max()
                            .unwrap_or(0);
                        *best = Placement { offsets, height };
                        fruitful |= step > 0;
                    }
                    (Outcome::Exhausted, _) => *proven = (*proven).max(cap + 1),
                    _ => {
                        if budget.stop.is_some_and(|f| f()) {
                            break 'rounds;
                        }
                    }
                }
            }
        }
        limit = limit.saturating_mul(2);
    }
    d.nodes
}
