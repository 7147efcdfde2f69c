//! Offset packing: constructive passes, then exact searches.
//!
//! [`solve`] first runs several fast constructive passes (best-fit into the
//! gaps left by conflicting buffers, under a few orderings) and keeps the
//! lowest. If that is above the lower bound it searches under the budget:
//! first the decision search at fixed heights ([`decide`](super::decide),
//! restarted by [`rounds`](super::rounds)), at the lower bound and below the
//! best found; then the older branch and bound ([`search`](super::search))
//! with what is left; then a local search over skyline orders.

use super::greedy::{conflicts, place_in_order};
use super::interval::{check_buffers, lower_bound, sections, Buffer, IntervalError, Placement};
use super::rounds::decide_rounds;
use super::search::{Budget, Outcome, Search};
use super::skyline::skyline;

/// Knobs of [`solve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SolveOptions {
    /// Search nodes allowed in total (deterministic budget; a skyline pass of
    /// the local search counts one node per buffer). 0 runs the
    /// constructive passes only. Default: 500 000 (about one to two seconds on the hardest instances).
    pub max_nodes: u64,
    /// Largest problem (non-trivial buffers) the exact search is tried on;
    /// larger ones get the constructive passes only. Default 4000.
    pub search_limit: usize,
    /// Most conflicting pairs for which the gap-filling passes and the
    /// search run (they keep conflict lists, 8 bytes a pair). Larger
    /// problems get the O(n log n) skyline pass only. Default 1 000 000.
    pub edge_limit: usize,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            max_nodes: 500_000,
            search_limit: 4000,
            edge_limit: 1_000_000,
        }
    }
}

/// A placement with what is known about its quality.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solution {
    /// Offsets and height.
    pub placement: Placement,
    /// The largest total size live at one moment.
    pub lower_bound: usize,
    /// Bytes one buffer per value would take (sum of sizes).
    pub naive_bytes: usize,
    /// True when no placement is lower (height equals the lower bound, or the search was exhausted).
    pub optimal: bool,
    /// Search nodes expanded.
    pub nodes: u64,
}

/// Nodes each of the first orderings spends at the bound before the dives.
const OPENING_NODES: u64 = 16_000;

/// Books a probe of `s` at `cap`: adopts a placement found, raises the
/// proven bound when the tree is exhausted.
fn book(out: Outcome, s: &mut Search<'_>, cap: usize, best: &mut Placement, proven: &mut usize) {
    match out {
        Outcome::Found => {
            if let Some((offs, h)) = s.best.take() {
                *best = Placement {
                    offsets: offs,
                    height: h,
                };
            }
        }
        Outcome::Exhausted => *proven = (*proven).max(cap + 1),
        Outcome::OutOfBudget => {}
    }
}

/// Nodes of one short dive of the search's restart phase.
const DIVE_NODES: u64 = 1000;

/// Number of conflicting pairs, by a sweep over start times.
fn conflict_count(bufs: &[Buffer]) -> usize {
    let mut ev: Vec<(usize, bool)> = Vec::with_capacity(bufs.len() * 2);
    for b in bufs {
        ev.push((b.lower, true));
        ev.push((b.upper, false));
    }
    ev.sort_unstable();
    let (mut live, mut pairs) = (0usize, 0usize);
    for (_, start) in ev {
        if start {
            pairs = pairs.saturating_add(live);
            live += 1;
        } else {
            live -= 1;
        }
    }
    pairs
}

/// The ways to order buffers for the constructive passes and the search.
fn orderings(bufs: &[Buffer]) -> Vec<Vec<usize>> {
    let n = bufs.len();
    let len = |i: usize| bufs[i].upper - bufs[i].lower;
    let mut out = Vec::new();
    let mut by = |key: &dyn Fn(usize) -> (u128, u128)| {
        let mut o: Vec<usize> = (0..n).collect();
        o.sort_by_key(|&i| (std::cmp::Reverse(key(i)), i));
        out.push(o);
    };
    by(&|i| (bufs[i].size as u128, len(i) as u128));
    by(&|i| (bufs[i].size as u128 * len(i) as u128, bufs[i].size as u128));
    by(&|i| (len(i) as u128, bufs[i].size as u128));
    out
}

/// Orders for the search's ranks: by the fullest section a buffer crosses
/// (`total`), its lifetime in sections (`width`) and its area, in three
/// priorities. Crowded, long, large buffers are the hardest to place late.
fn search_orders(bufs: &[Buffer], span: &[(u32, u32)], nsec: usize) -> Vec<Vec<usize>> {
    let mut sum = vec![0u128; nsec];
    for (b, &(lo, hi)) in bufs.iter().zip(span) {
        for s in lo..hi {
            sum[s as usize] += b.size as u128;
        }
    }
    let total: Vec<u128> = span
        .iter()
        .map(|&(lo, hi)| (lo..hi).map(|s| sum[s as usize]).max().unwrap_or(0))
        .collect();
    let width = |i: usize| (span[i].1 - span[i].0) as u128;
    let area = |i: usize| bufs[i].size as u128 * (bufs[i].upper - bufs[i].lower) as u128;
    let size = |i: usize| bufs[i].size as u128;
    let keys: [&dyn Fn(usize) -> [u128; 3]; 7] = [
        &|i| [total[i], width(i), area(i)],
        &|i| [width(i), area(i), total[i]],
        &|i| [total[i], area(i), width(i)],
        &|i| [size(i), width(i), total[i]],
        &|i| [area(i), total[i], 0],
        &|i| [total[i], size(i), width(i)],
        &|i| [width(i), size(i), total[i]],
    ];
    keys.iter()
        .map(|key| {
            let mut o: Vec<usize> = (0..bufs.len()).collect();
            o.sort_by_key(|&i| (std::cmp::Reverse(key(i)), i));
            o
        })
        .collect()
}

/// Hill climbing over skyline orders: perturb the best order (a few
/// random swaps, seeded, so runs repeat), keep the result when it is no
/// higher. Each skyline pass counts as one node per buffer. Returns the
/// nodes spent.
#[allow(clippy::too_many_arguments)]
fn improve_order(
    bufs: &[Buffer],
    span: &[(u32, u32)],
    nsec: usize,
    orders: &[Vec<usize>],
    best: &mut Placement,
    lb: usize,
    work: u64,
    budget: &Budget<'_>,
) -> u64 {
    let n = bufs.len();
    if n < 2 {
        return 0;
    }
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rand = move |m: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % m as u64) as usize
    };
    // Start from the ordering whose skyline is lowest.
    let mut order = orders[0].clone();
    let mut cur = usize::MAX;
    for o in orders {
        let h = skyline(bufs, span, nsec, o).height;
        if h < cur {
            cur = h;
            order = o.clone();
        }
    }
    let mut spent = 0u64;
    let mut cand = order.clone();
    while spent < work && best.height > lb {
        if spent % (64 * n as u64) < n as u64 && budget.stop.is_some_and(|f| f()) {
            break;
        }
        cand.copy_from_slice(&order);
        for _ in 0..1 + rand(3) {
            let i = rand(n);
            let j = if rand(2) == 0 {
                rand(n)
            } else {
                (i + 1 + rand(8)).min(n - 1)
            };
            cand.swap(i, j);
        }
        let p = skyline(bufs, span, nsec, &cand);
        spent += n as u64;
        if p.height <= cur {
            cur = p.height;
            std::mem::swap(&mut order, &mut cand);
            if p.height < best.height {
                *best = p;
            }
        }
    }
    spent
}

/// Best fit: each buffer goes into the smallest gap between its placed
/// conflicting neighbours that holds it (lowest such gap on ties), or on top.
fn best_fit(bufs: &[Buffer], adj: &[Vec<u32>], order: &[usize]) -> Placement {
    let mut offsets: Vec<Option<usize>> = vec![None; bufs.len()];
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let mut height = 0;
    for &i in order {
        let size = bufs[i].size;
        taken.clear();
        for &j in &adj[i] {
            if let Some(o) = offsets[j as usize] {
                taken.push((o, o + bufs[j as usize].size));
            }
        }
        taken.sort_unstable();
        let (mut at, mut best, mut best_gap) = (0usize, None, usize::MAX);
        for &(lo, hi) in &taken {
            if lo >= at && lo - at >= size && lo - at < best_gap {
                best_gap = lo - at;
                best = Some(at);
            }
            at = at.max(hi);
        }
        let o = best.unwrap_or(at);
        offsets[i] = Some(o);
        height = height.max(o + size);
    }
    Placement {
        offsets: offsets.into_iter().map(|o| o.unwrap_or(0)).collect(),
        height,
    }
}

/// Plans offsets for `buffers` (see the module docs). `budget` may carry a
/// wall-clock callback; `options.max_nodes` bounds the search
/// deterministically.
///
/// ```
/// use warmarena::planner::{solve, Budget, Buffer, SolveOptions};
/// let bufs = [Buffer::new(0, 3, 4), Buffer::new(1, 2, 2), Buffer::new(2, 4, 2), Buffer::new(3, 5, 4)];
/// let sol = solve(&bufs, &SolveOptions::default(), &Budget::nodes(u64::MAX)).unwrap();
/// assert_eq!(sol.placement.height, sol.lower_bound);
/// assert!(sol.optimal);
/// ```
pub fn solve(
    buffers: &[Buffer],
    options: &SolveOptions,
    budget: &Budget<'_>,
) -> Result<Solution, IntervalError> {
    let naive_bytes = check_buffers(buffers)?;
    let lb = lower_bound(buffers);
    // Work on the non-trivial buffers only; trivial ones sit at offset 0.
    let keep: Vec<usize> = (0..buffers.len())
        .filter(|&i| !buffers[i].is_trivial())
        .collect();
    let bufs: Vec<Buffer> = keep.iter().map(|&i| buffers[i]).collect();
    let (span, nsec) = sections(&bufs);
    let orders = orderings(&bufs);
    let mut best: Option<Placement> = None;
    // Keeps the lowest placement; true once it reaches the bound (the
    // remaining passes are then skipped).
    let mut keep_best = |p: Placement| {
        if best.as_ref().map_or(true, |b| p.height < b.height) {
            best = Some(p);
        }
        best.as_ref().is_some_and(|b| b.height <= lb)
    };
    // Longest-first skyline passes re-queue buffers often on long traces:
    // large problems keep the area order, the best on the real traces.
    let sky_orders: &[Vec<usize>] = if bufs.len() > 8000 {
        &orders[1..2]
    } else {
        &orders
    };
    let mut done = false;
    for o in sky_orders {
        done = keep_best(skyline(&bufs, &span, nsec, o));
        if done {
            break;
        }
    }
    // Gap-filling passes need conflict lists: only when they are small.
    let adj = if !done && conflict_count(&bufs) <= options.edge_limit {
        conflicts(&bufs)
    } else {
        Vec::new()
    };
    if !adj.is_empty() {
        // Large problems keep one best-fit pass (largest first).
        let large = bufs.len() > 4000;
        for o in &orders[..if large { 1 } else { orders.len() }] {
            if keep_best(best_fit(&bufs, &adj, o))
                || (!large && keep_best(place_in_order(&bufs, &adj, o)))
            {
                break;
            }
        }
    }
    let mut best = best.unwrap_or(Placement {
        offsets: Vec::new(),
        height: 0,
    });
    let mut optimal = best.height <= lb;
    let mut nodes = 0;
    let searchable = bufs.len() <= options.search_limit && !adj.is_empty();
    // Two thirds of the budget go to the exact search, the rest to a local
    // search over skyline orders when the search could not prove a height.
    let search_nodes = options.max_nodes - options.max_nodes / 3;
    let mut proven = lb;
    if !optimal && search_nodes > 0 && searchable {
        // The decision search first (7/8 of the search budget): restarts
        // over rankings, at the lowest height not ruled out and below the
        // best found. The branch and bound gets what it leaves.
        nodes += decide_rounds(
            &bufs,
            &adj,
            &mut best,
            &mut proven,
            search_nodes - search_nodes / 8,
            budget,
        );
        optimal = best.height <= proven;
    }
    if !optimal && search_nodes > nodes && searchable && !budget.stop.is_some_and(|f| f()) {
        let orders = search_orders(&bufs, &span, nsec);
        let mut searches: Vec<Search<'_>> = orders
            .iter()
            .map(|o| Search::new(&bufs, &adj, &span, nsec, o))
            .collect();
        // Two kinds of probe share the budget, round robin over the
        // orderings with node slices that double each round (restarts
        // tame the heavy tail of any one ordering): one looks for a
        // placement at the lowest height not yet ruled out, one for a
        // placement halfway between the best found and a guess of how low
        // one can go (raised when a probe gives up).
        let mut guess = proven;
        // Phase 0: the first three orderings probe the bound for a while
        // (their tree is kept and continued in phase 2).
        for s in searches.iter_mut().take(3) {
            if best.height <= proven || nodes >= search_nodes / 4 {
                break;
            }
            let (before, cap) = (s.nodes, proven);
            let out = s.run(
                cap,
                &Budget {
                    max_nodes: before + OPENING_NODES.min(search_nodes / 4 - nodes),
                    stop: budget.stop,
                },
            );
            nodes += s.nodes - before;
            book(out, s, cap, &mut best, &mut proven);
        }
        // Phase 1: many short dives over perturbed orderings (seeded, so
        // runs repeat). On hard instances any one ordering is heavy-tailed:
        // most dives fail within a thousand nodes, a few percent find a
        // placement in a few hundred. Probes cycle over three heights: the
        // lowest not ruled out, halfway to the best found, and an eighth
        // below the best found.
        let dive_nodes = search_nodes / 2;
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut order: Vec<usize> = Vec::with_capacity(bufs.len());
        let mut dive = 0usize;
        while best.height > proven && nodes < dive_nodes {
            if dive % 64 == 63 && budget.stop.is_some_and(|f| f()) {
                break;
            }
            let gap = best.height - 1 - proven;
            let cap = match dive % 3 {
                0 => proven,
                1 => proven + gap / 2,
                _ => best.height - 1 - gap / 8,
            };
            order.clear();
            order.extend_from_slice(&orders[dive % orders.len()]);
            let n = order.len();
            for i in 0..n {
                if rand() % 4 == 0 {
                    let j = (i + 1 + (rand() % 16) as usize).min(n - 1);
                    order.swap(i, j);
                }
            }
            dive += 1;
            let mut s = Search::new(&bufs, &adj, &span, nsec, &order);
            let out = s.run(
                cap,
                &Budget {
                    max_nodes: DIVE_NODES.min(dive_nodes - nodes),
                    stop: budget.stop,
                },
            );
            nodes += s.nodes;
            book(out, &mut s, cap, &mut best, &mut proven);
        }
        // Phase 2: systematic probes.
        let mut slice = 4000u64;
        'rounds: loop {
            for s in searches.iter_mut() {
                for probe_low in [true, false] {
                    if best.height <= proven || nodes >= search_nodes {
                        break 'rounds;
                    }
                    guess = guess.max(proven);
                    let cap = if probe_low {
                        proven
                    } else if guess < best.height - 1 {
                        guess + (best.height - 1 - guess) / 2
                    } else {
                        continue;
                    };
                    let before = s.nodes;
                    let limit = before + slice.min(search_nodes - nodes);
                    let out = s.run(
                        cap,
                        &Budget {
                            max_nodes: limit,
                            stop: budget.stop,
                        },
                    );
                    nodes += s.nodes - before;
                    match out {
                        Outcome::Found => {
                            if let Some((offs, h)) = s.best.take() {
                                best = Placement {
                                    offsets: offs,
                                    height: h,
                                };
                            }
                        }
                        Outcome::Exhausted => proven = proven.max(cap + 1),
                        Outcome::OutOfBudget => {
                            if budget.stop.is_some_and(|f| f()) {
                                break 'rounds;
                            }
                            if !probe_low {
                                guess = cap + 1;
                            }
                        }
                    }
                }
            }
            slice = slice.saturating_mul(2);
        }
        optimal = best.height <= proven;
    }
    if !optimal && searchable && !budget.stop.is_some_and(|f| f()) {
        let work = options.max_nodes.saturating_sub(nodes);
        nodes += improve_order(&bufs, &span, nsec, &orders, &mut best, proven, work, budget);
        optimal = best.height <= proven;
    }
    let mut offsets = vec![0usize; buffers.len()];
    for (k, &i) in keep.iter().enumerate() {
        offsets[i] = best.offsets[k];
    }
    let placement = Placement {
        offsets,
        height: best.height,
    };
    debug_assert_eq!(
        super::validate::validate_placement(buffers, &placement, 1),
        Ok(())
    );
    Ok(Solution {
        placement,
        lower_bound: lb,
        naive_bytes,
        optimal,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::validate::validate_placement;

    fn run(bufs: &[Buffer], max_nodes: u64) -> Solution {
        let opts = SolveOptions {
            max_nodes,
            ..SolveOptions::default()
        };
        solve(bufs, &opts, &Budget::nodes(u64::MAX)).unwrap()
    }

    #[test]
    fn search_closes_a_gap_the_constructive_leaves() {
        // A staircase where size-first packing wastes space.
        let bufs = [
            Buffer::new(0, 2, 2),
            Buffer::new(1, 4, 3),
            Buffer::new(3, 6, 2),
            Buffer::new(0, 1, 3),
            Buffer::new(2, 3, 2),
            Buffer::new(4, 6, 3),
            Buffer::new(5, 7, 1),
        ];
        let sol = run(&bufs, 100_000);
        assert_eq!(validate_placement(&bufs, &sol.placement, 1), Ok(()));
        assert!(sol.optimal);
        assert!(sol.placement.height >= sol.lower_bound);
        assert!(sol.placement.height <= greedy_height(&bufs));
    }

    fn greedy_height(bufs: &[Buffer]) -> usize {
        crate::planner::greedy::greedy_by_size(bufs).height
    }

    #[test]
    fn trivial_and_empty_inputs() {
        assert_eq!(run(&[], 10).placement.height, 0);
        let bufs = [
            Buffer::new(3, 3, 100),
            Buffer::new(0, 5, 0),
            Buffer::new(0, 1, 7),
        ];
        let sol = run(&bufs, 10);
        assert_eq!(sol.placement.height, 7);
        assert!(sol.optimal);
        assert_eq!(sol.naive_bytes, 107);
    }

    #[test]
    fn reversed_range_is_an_error() {
        let opts = SolveOptions::default();
        assert!(solve(&[Buffer::new(5, 1, 1)], &opts, &Budget::nodes(1)).is_err());
    }

    #[test]
    fn stop_callback_ends_the_search() {
        let bufs: Vec<Buffer> = (0..12)
            .map(|i| Buffer::new(i % 5, i % 5 + 3, 1 + (i * 7) % 5))
            .collect();
        let stop = || true;
        let sol = solve(
            &bufs,
            &SolveOptions::default(),
            &Budget {
                max_nodes: u64::MAX,
                stop: Some(&stop),
            },
        )
        .unwrap();
        assert_eq!(validate_placement(&bufs, &sol.placement, 1), Ok(()));
    }
}
