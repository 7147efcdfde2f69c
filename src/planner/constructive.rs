//! Constructive placements: one pass each, no search, all kept (the lowest
//! wins, and nothing later may return a higher one).
//!
//! * *online best fit* ([`online`](super::online)): O(n log n) whatever
//!   the conflicts; the first pass above 32 768 buffers, so even a budget
//!   spent at once leaves a placement there;
//! * *skyline* ([`skyline`](super::skyline)): O(n log n) plus re-keys, no
//!   conflicts enumerated; under the area order it is the first pass on
//!   smaller problems (hurried to completion when the budget ends), and
//!   the second on larger ones (given up unless nearly done);
//! * *first fit* ([`fit`](super::fit)) by size (greedy-by-size, the
//!   baseline every planner is compared against), by start and by the
//!   fullest section crossed (most contended first);
//! * *best fit* by size, and the remaining orders on small problems.
//!
//! The fits cost O(n log n) plus the conflicting pairs met, in O(n) memory.
//! Every pass after the first is skipped once the stop callback says so or
//! a placement reaches the lower bound.

use super::fit::{place, Fit};
use super::greedy::size_order;
use super::interval::{Buffer, Placement};
use super::online::online_best_fit;
use super::radix::sort_pairs;
use super::skyline::{skyline_until, OnStop};

/// Problems with more buffers get only the area-ordered skyline pass (the
/// longest-first ones re-queue buffers often on long traces).
const SKYLINE_LIMIT: usize = 8000;

/// Problems with at most this many buffers get every fit under every order.
const ALL_ORDERS_LIMIT: usize = 4000;

/// Problems with more buffers start with the online best fit
/// ([`online`](super::online): O(n log n) whatever the conflicts), and
/// their skyline is given up when the budget runs out before it is nearly
/// done (hurrying it would cost more than a few percent of the time).
const ONLINE_FIRST: usize = 32_768;

/// A constructive pass that was run: its name and its height (`None` when
/// the budget cut it short).
///
/// ```
/// use warmarena::planner::{solve, Budget, Buffer, SolveOptions};
/// let bufs = [Buffer::new(0, 2, 8), Buffer::new(1, 3, 8)];
/// let sol = solve(&bufs, &SolveOptions::default(), &Budget::nodes(0)).unwrap();
/// assert_eq!(sol.passes[0].name, "skyline by area");
/// assert_eq!(sol.passes[0].height, Some(16));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// What it is: the method and the order (`"first fit by size"`...).
    pub name: &'static str,
    /// The height it reached, or `None` when it was cut short.
    pub height: Option<usize>,
}

/// What the constructive passes found.
#[derive(Clone, Debug)]
pub(crate) struct Start {
    /// The lowest placement.
    pub(crate) best: Placement,
    /// Greedy-by-size's height, when its pass ran to the end.
    pub(crate) greedy_height: Option<usize>,
    /// Heights of every pass that ran to the end.
    pub(crate) heights: Vec<usize>,
    /// Every pass tried, in order.
    pub(crate) passes: Vec<Pass>,
}

/// Builds an order of the buffers when its pass comes.
type OrderFn<'a> = dyn Fn() -> Vec<usize> + 'a;

/// Orders by a key, largest first, ties by index.
fn order_by<K: Ord>(n: usize, key: impl Fn(usize) -> K) -> Vec<usize> {
    sorted_by(n, |i| std::cmp::Reverse(key(i)))
}

/// Indices `0..n` by `key`, ties by index. The keys are computed once
/// into one vector and sorted there: a comparison then reads two adjacent
/// entries, not two buffers anywhere in memory (several times faster on a
/// million buffers).
pub(crate) fn sorted_by<K: Ord>(n: usize, key: impl Fn(usize) -> K) -> Vec<usize> {
    let mut keyed: Vec<(K, usize)> = (0..n).map(|i| (key(i), i)).collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// Area (size x lifetime), then size.
pub(crate) fn area_order(bufs: &[Buffer]) -> Vec<usize> {
    order_by(bufs.len(), |i| {
        let b = bufs[i];
        (b.size as u128 * (b.upper - b.lower) as u128, b.size)
    })
}

/// Lifetime, then size.
pub(crate) fn lifetime_order(bufs: &[Buffer]) -> Vec<usize> {
    order_by(bufs.len(), |i| {
        (bufs[i].upper - bufs[i].lower, bufs[i].size)
    })
}

/// Start time (earliest first), then size (largest first), then index:
/// two stable radix sorts, by size and then by start (a comparison sort
/// took a tenth of a million-buffer plan).
pub(crate) fn start_order(bufs: &[Buffer]) -> Vec<usize> {
    let big = bufs.iter().map(|b| b.size).max().unwrap_or(0);
    let by_size = sort_pairs(
        bufs.iter()
            .enumerate()
            .map(|(i, b)| ((big - b.size) as u64, i as u32)),
    );
    let by_start = sort_pairs(
        by_size
            .payloads()
            .map(|i| (bufs[i as usize].lower as u64, i)),
    );
    by_start.payloads().map(|i| i as usize).collect()
}

/// The fullest section a buffer crosses (bytes live there), then size:
/// the most contended buffers first.
pub(crate) fn conflict_order(bufs: &[Buffer], span: &[(u32, u32)], nsec: usize) -> Vec<usize> {
    // Bytes per section by a difference array, then the largest over each
    // span by a bottom-up max tree: O(n log n) time, O(n) memory.
    let mut diff = vec![0i128; nsec + 1];
    for (b, &(lo, hi)) in bufs.iter().zip(span) {
        diff[lo as usize] += b.size as i128;
        diff[hi as usize] -= b.size as i128;
    }
    let leaves = nsec.max(1).next_power_of_two();
    let mut tree = vec![0u128; 2 * leaves];
    let mut acc = 0i128;
    for (s, d) in diff[..nsec].iter().enumerate() {
        acc += d;
        tree[leaves + s] = acc as u128;
    }
    for k in (1..leaves).rev() {
        tree[k] = tree[2 * k].max(tree[2 * k + 1]);
    }
    let fullest = |(lo, hi): (u32, u32)| {
        let (mut a, mut b, mut m) = (lo as usize + leaves, hi as usize + leaves, 0u128);
        while a < b {
            if a & 1 == 1 {
                m = m.max(tree[a]);
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                m = m.max(tree[b]);
            }
            a >>= 1;
            b >>= 1;
        }
        m
    };
    order_by(bufs.len(), |i| (fullest(span[i]), bufs[i].size))
}

/// Runs the constructive passes over the non-trivial `bufs` (sections from
/// [`elementary_sections`](super::interval::elementary_sections)), stopping early at `lb` or
/// when `stop` says so (the first pass always runs).
pub(crate) fn construct(
    bufs: &[Buffer],
    span: &[(u32, u32)],
    nsec: usize,
    lb: usize,
    stop: Option<&dyn Fn() -> bool>,
) -> Start {
    let n = bufs.len();
    let mut start = Start {
        best: Placement {
            offsets: vec![0; n],
            height: if n == 0 { 0 } else { usize::MAX },
        },
        greedy_height: None,
        heights: Vec::new(),
        passes: Vec::new(),
    };
    if n == 0 {
        return start;
    }
    let halt = |s: &Start| s.best.height <= lb || stop.is_some_and(|f| f());
    let keep = |s: &mut Start, name: &'static str, p: Option<Placement>| {
        s.passes.push(Pass {
            name,
            height: p.as_ref().map(|p| p.height),
        });
        if let Some(p) = p {
            s.heights.push(p.height);
            if p.height < s.best.height {
                s.best = p;
            }
        }
    };
    let large = n > ONLINE_FIRST;
    if large {
        // Always completes, in O(n log n).
        keep(&mut start, "online best fit", online_best_fit(bufs, None));
    }
    if !large || !halt(&start) {
        // On smaller problems the first pass: it always completes, hurried
        // (finished without waiting for lower candidates) once `stop` says so.
        let mode = if large {
            OnStop::HurryIfCheap
        } else {
            OnStop::Hurry
        };
        // The order costs n log n: a large problem checks the stop again.
        let area = area_order(bufs);
        let p = skyline_until(bufs, span, nsec, &area, stop, mode);
        keep(&mut start, "skyline by area", p);
    }
    if halt(&start) {
        return start;
    }
    let by_size = size_order(bufs);
    let greedy = place(bufs, &by_size, Fit::First, stop);
    start.greedy_height = greedy.as_ref().map(|p| p.height);
    keep(&mut start, "first fit by size", greedy);
    let small = n <= ALL_ORDERS_LIMIT;
    // Each pass is built only when its turn comes (the orders cost n log n).
    let passes: [(&str, &OrderFn, Fit, bool); 6] = [
        (
            "first fit by start",
            &|| start_order(bufs),
            Fit::First,
            true,
        ),
        (
            "first fit by conflict",
            &|| conflict_order(bufs, span, nsec),
            Fit::First,
            true,
        ),
        ("best fit by size", &|| size_order(bufs), Fit::Best, true),
        ("best fit by area", &|| area_order(bufs), Fit::Best, small),
        (
            "best fit by lifetime",
            &|| lifetime_order(bufs),
            Fit::Best,
            small,
        ),
        (
            "first fit by lifetime",
            &|| lifetime_order(bufs),
            Fit::First,
            small,
        ),
    ];
    for (name, order, fit, run) in passes {
        if halt(&start) {
            return start;
        }
        if run {
            let p = place(bufs, &order(), fit, stop);
            keep(&mut start, name, p);
        }
    }
    if n <= SKYLINE_LIMIT {
        for (name, order) in [
            ("skyline by size", by_size),
            ("skyline by lifetime", lifetime_order(bufs)),
        ] {
            if halt(&start) {
                return start;
            }
            let p = skyline_until(bufs, span, nsec, &order, stop, OnStop::Abandon);
            keep(&mut start, name, p);
        }
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::interval::{elementary_sections, lower_bound};
    use crate::planner::rng::Rng;
    use crate::planner::validate::validate_placement;

    #[test]
    fn conflict_order_puts_the_most_contended_first() {
        let bufs = [
            Buffer::new(0, 2, 5),
            Buffer::new(1, 3, 5),
            Buffer::new(5, 6, 9),
            Buffer::new(2, 4, 1),
        ];
        let (span, nsec) = elementary_sections(&bufs);
        // Fullest sections: 10 for buffers 0 and 1, 9 for 2, 6 for 3.
        assert_eq!(conflict_order(&bufs, &span, nsec), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_start_is_valid_and_no_higher_than_any_pass() {
        let mut rng = Rng::new(3);
        // Miri runs the same checks on smaller instances.
        let (rounds, n) = if cfg!(miri) { (2, 30) } else { (20, 200) };
        for _ in 0..rounds {
            let bufs: Vec<Buffer> = (0..n)
                .map(|_| {
                    let l = rng.below(100);
                    Buffer::new(l, l + 1 + rng.below(25), 1 + rng.below(1000))
                })
                .collect();
            let (span, nsec) = elementary_sections(&bufs);
            let s = construct(&bufs, &span, nsec, lower_bound(&bufs), None);
            assert_eq!(validate_placement(&bufs, &s.best, 1), Ok(()));
            assert_eq!(s.best.height, *s.heights.iter().min().unwrap());
            let greedy = crate::planner::greedy_by_size(&bufs).height;
            assert!(s.best.height <= greedy);
            if s.best.height > lower_bound(&bufs) {
                assert_eq!(s.greedy_height, Some(greedy));
            }
        }
    }

    #[test]
    fn start_order_is_by_start_then_largest_then_index() {
        let mut rng = Rng::new(5);
        let n = if cfg!(miri) { 80 } else { 3000 };
        let bufs: Vec<Buffer> = (0..n)
            .map(|_| {
                let l = rng.below(300);
                Buffer::new(l, l + rng.below(9), rng.below(40))
            })
            .collect();
        let want = sorted_by(n, |i| (bufs[i].lower, std::cmp::Reverse(bufs[i].size)));
        assert_eq!(start_order(&bufs), want);
    }
}
