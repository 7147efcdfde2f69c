//! Offset packing: constructive passes, then searches, then a local search.
//!
//! [`solve`] is three phases over the non-trivial buffers ([`Problem`]):
//!
//! 1. [`construct`]: skyline, first-fit
//!    and best-fit passes; the lowest is the start, and nothing after may
//!    return a higher placement (every later phase only adopts strictly
//!    lower ones);
//! 2. [`search`]: the decision search at fixed heights
//!    ([`decide`](super::decide), restarted by [`rounds`](super::rounds)),
//!    on problems small enough for conflict lists;
//! 3. [`improve_order`]: a hill climb over skyline orders with what is
//!    left.
//!
//! The phases are public to the crate so that [`plan_trace`](super::plan_trace)
//! can time each and give each its share of a wall-clock budget.

use super::budget::Budget;
use super::constructive::{area_order, construct, lifetime_order, Pass};
use super::greedy::{conflicts, size_order};
use super::interval::{
    check_buffers, elementary_sections, lower_bound, Buffer, IntervalError, Placement,
};
use super::local::improve_order;
use super::rounds::decide_rounds;

/// Knobs of [`solve`]: start from `SolveOptions::default()` and change
/// them with the builder methods (named for the fields), or assign the
/// public fields of a value you hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SolveOptions {
    /// Search nodes allowed in total (deterministic budget; a skyline pass of
    /// the local search counts one node per buffer). 0 runs the
    /// constructive passes only. Default: 500 000 (about one to two seconds on the hardest instances).
    pub max_nodes: u64,
    /// Largest problem (non-trivial buffers) the exact search is tried on;
    /// larger ones get the constructive passes and the local search.
    /// Default 4000.
    pub search_limit: usize,
    /// Most conflicting pairs for which the exact search runs (it keeps
    /// conflict lists, 8 bytes a pair). Default 1 000 000.
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

impl SolveOptions {
    /// Sets [`max_nodes`](SolveOptions::max_nodes).
    ///
    /// ```
    /// let o = warmarena::planner::SolveOptions::default().max_nodes(0);
    /// assert_eq!(o.max_nodes, 0);
    /// ```
    pub fn max_nodes(mut self, nodes: u64) -> Self {
        self.max_nodes = nodes;
        self
    }

    /// Sets [`search_limit`](SolveOptions::search_limit).
    pub fn search_limit(mut self, buffers: usize) -> Self {
        self.search_limit = buffers;
        self
    }

    /// Sets [`edge_limit`](SolveOptions::edge_limit).
    pub fn edge_limit(mut self, pairs: usize) -> Self {
        self.edge_limit = pairs;
        self
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
    /// Greedy-by-size's height ([`greedy_by_size`](super::greedy_by_size)),
    /// when its pass ran (it is skipped once another pass reaches the
    /// bound, or when the budget ran out first). `placement.height` is
    /// never above it.
    pub greedy_height: Option<usize>,
    /// The constructive passes tried, in order, with their heights (not
    /// part of the stable API: for the planner's tests).
    #[doc(hidden)]
    pub passes: Vec<Pass>,
}

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

/// The non-trivial part of a problem, with its time sections.
pub(crate) struct Problem {
    /// Index in the caller's buffers of each kept buffer.
    keep: Vec<usize>,
    /// The kept (non-trivial) buffers.
    pub(crate) bufs: Vec<Buffer>,
    /// Elementary time sections of each kept buffer, and their count.
    pub(crate) span: Vec<(u32, u32)>,
    pub(crate) nsec: usize,
    /// The largest total size live at one moment.
    pub(crate) lb: usize,
    /// Sum of all sizes.
    pub(crate) naive_bytes: usize,
    /// Buffers in the caller's problem.
    len: usize,
}

impl Problem {
    /// Checks `buffers` and keeps the non-trivial ones.
    pub(crate) fn new(buffers: &[Buffer]) -> Result<Self, IntervalError> {
        let naive_bytes = check_buffers(buffers)?;
        let keep: Vec<usize> = (0..buffers.len())
            .filter(|&i| !buffers[i].is_trivial())
            .collect();
        let bufs: Vec<Buffer> = keep.iter().map(|&i| buffers[i]).collect();
        let (span, nsec) = elementary_sections(&bufs);
        // The bound from the sections (bytes live in each), no second sort;
        // sums stay below `naive_bytes`, which fits.
        let mut diff = vec![0isize; nsec + 1];
        for (b, &(lo, hi)) in bufs.iter().zip(&span) {
            diff[lo as usize] = diff[lo as usize].wrapping_add(b.size as isize);
            diff[hi as usize] = diff[hi as usize].wrapping_sub(b.size as isize);
        }
        let (mut live, mut lb) = (0usize, 0usize);
        for &d in &diff[..nsec] {
            live = live.wrapping_add(d as usize);
            lb = lb.max(live);
        }
        debug_assert_eq!(lb, lower_bound(buffers));
        Ok(Problem {
            keep,
            bufs,
            span,
            nsec,
            lb,
            naive_bytes,
            len: buffers.len(),
        })
    }
}

/// Where a solve stands between phases.
pub(crate) struct State {
    /// The lowest placement of the kept buffers so far.
    pub(crate) best: Placement,
    /// No placement is below this (the bound, raised by exhausted probes).
    pub(crate) proven: usize,
    /// Search nodes spent.
    pub(crate) nodes: u64,
    /// Greedy-by-size's height, when computed.
    pub(crate) greedy_height: Option<usize>,
    /// The constructive passes tried.
    pub(crate) passes: Vec<Pass>,
}

impl State {
    /// True when the best is proven lowest.
    pub(crate) fn optimal(&self) -> bool {
        self.best.height <= self.proven
    }
}

/// Phase 1: the constructive passes (the first always completes).
pub(crate) fn start(p: &Problem, stop: Option<&dyn Fn() -> bool>) -> State {
    let s = construct(&p.bufs, &p.span, p.nsec, p.lb, stop);
    State {
        best: s.best,
        proven: p.lb,
        nodes: 0,
        greedy_height: s.greedy_height,
        passes: s.passes,
    }
}

/// Phase 2: the decision rounds, for at most `nodes` nodes, on problems
/// within `options.search_limit` buffers and `options.edge_limit` pairs.
pub(crate) fn search(
    p: &Problem,
    st: &mut State,
    options: &SolveOptions,
    nodes: u64,
    budget: &Budget<'_>,
) {
    let small = p.bufs.len() <= options.search_limit;
    if st.optimal() || nodes == 0 || !small || budget.stop.is_some_and(|f| f()) {
        return;
    }
    if conflict_count(&p.bufs) > options.edge_limit {
        return;
    }
    let adj = conflicts(&p.bufs);
    st.nodes += decide_rounds(&p.bufs, &adj, &mut st.best, &mut st.proven, nodes, budget);
}

/// Phase 3: the hill climb over skyline orders, for at most `work` nodes.
pub(crate) fn local(p: &Problem, st: &mut State, work: u64, budget: &Budget<'_>) {
    if st.optimal() || work == 0 || budget.stop.is_some_and(|f| f()) {
        return;
    }
    let orders = [
        area_order(&p.bufs),
        size_order(&p.bufs),
        lifetime_order(&p.bufs),
    ];
    st.nodes += improve_order(
        &p.bufs,
        (&p.span, p.nsec),
        &orders,
        &mut st.best,
        st.proven,
        work,
        budget,
    );
}

/// Spreads the kept buffers' offsets back over the caller's buffers.
pub(crate) fn finish(p: &Problem, st: State) -> Solution {
    let mut offsets = vec![0usize; p.len];
    for (k, &i) in p.keep.iter().enumerate() {
        offsets[i] = st.best.offsets[k];
    }
    Solution {
        optimal: st.optimal(),
        placement: Placement {
            offsets,
            height: st.best.height,
        },
        lower_bound: p.lb,
        naive_bytes: p.naive_bytes,
        nodes: st.nodes,
        greedy_height: st.greedy_height,
        passes: st.passes,
    }
}

/// Plans offsets for `buffers` (see the module docs). `budget` may carry a
/// wall-clock callback (checked in every phase); `options.max_nodes` bounds
/// the searches deterministically: two thirds to the decision rounds, the
/// rest (and what they leave) to the local search.
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
    let p = Problem::new(buffers)?;
    let mut st = start(&p, budget.stop);
    let search_nodes = options.max_nodes - options.max_nodes / 3;
    search(&p, &mut st, options, search_nodes, budget);
    let left = options.max_nodes.saturating_sub(st.nodes);
    local(&p, &mut st, left, budget);
    let sol = finish(&p, st);
    debug_assert_eq!(
        super::validate::validate_placement(buffers, &sol.placement, 1),
        Ok(())
    );
    Ok(sol)
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
