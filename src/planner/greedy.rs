//! Greedy-by-size: the baseline every published planner is compared against.
//!
//! Buffers are taken largest first (ties: longer life first, then index) and
//! each goes at the lowest offset where it fits beside the already placed
//! buffers it conflicts with ([`fit`](super::fit)). This is the strategy of TFLite's and TVM's
//! greedy planners; [`solve`](super::solve) must beat it, and the benchmarks
//! report both.

use super::constructive::{conflict_order, sorted_by, start_order};
use super::fit::{place, Fit};
use super::interval::{elementary_sections, Buffer, Placement};

/// Conflict lists: `adj[i]` holds every buffer that conflicts with buffer `i`.
/// Built with a sweep over start times, O(n log n + edges); only the exact
/// searches use them, on problems whose conflicting pairs were counted first.
pub(crate) fn conflicts(buffers: &[Buffer]) -> Vec<Vec<u32>> {
    let mut order: Vec<u32> = (0..buffers.len() as u32)
        .filter(|&i| !buffers[i as usize].is_trivial())
        .collect();
    order.sort_unstable_by_key(|&i| (buffers[i as usize].lower, i));
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); buffers.len()];
    // Live buffers; dead ones are dropped lazily.
    let mut live: Vec<u32> = Vec::new();
    for &i in &order {
        let b = buffers[i as usize];
        live.retain(|&j| buffers[j as usize].upper > b.lower);
        for &j in &live {
            adj[i as usize].push(j);
            adj[j as usize].push(i);
        }
        live.push(i);
    }
    adj
}

/// The order greedy-by-size takes: largest first, then longest, then index.
pub(crate) fn size_order(buffers: &[Buffer]) -> Vec<usize> {
    sorted_by(buffers.len(), |i| {
        let b = buffers[i];
        (
            std::cmp::Reverse(b.size),
            std::cmp::Reverse(b.upper - b.lower),
        )
    })
}

/// The orders [`greedy`] takes buffers in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GreedyOrder {
    /// Largest first (then longest, then index): greedy-by-size.
    Size,
    /// Earliest start first (then largest).
    Start,
    /// Most contended first: the largest total size live at one moment
    /// during the buffer's life, then size.
    Conflict,
}

/// Places `buffers` one by one in `order`, each at the lowest offset where
/// it fits beside the placed buffers it conflicts with (first fit). Never
/// fails; valid, but may be far above the lower bound.
/// [`solve`](super::solve) never returns a placement above any of the three
/// (when its own pass of one was cut short by the budget, it makes no
/// claim about that one). O(n) memory: the placed conflicting buffers are
/// found by an overlap query, not kept in lists; O(n log n) time plus the
/// conflicting pairs.
///
/// ```
/// use warmarena::planner::{greedy, lower_bound, Buffer, GreedyOrder};
/// let bufs = [Buffer::new(0, 2, 4), Buffer::new(1, 3, 8), Buffer::new(2, 4, 4)];
/// for order in [GreedyOrder::Size, GreedyOrder::Start, GreedyOrder::Conflict] {
///     assert_eq!(greedy(&bufs, order).height, 12);
/// }
/// assert_eq!(lower_bound(&bufs), 12);
/// ```
pub fn greedy(buffers: &[Buffer], order: GreedyOrder) -> Placement {
    let keep: Vec<usize> = (0..buffers.len())
        .filter(|&i| !buffers[i].is_trivial())
        .collect();
    let bufs: Vec<Buffer> = keep.iter().map(|&i| buffers[i]).collect();
    let order = match order {
        GreedyOrder::Size => size_order(&bufs),
        GreedyOrder::Start => start_order(&bufs),
        GreedyOrder::Conflict => {
            let (span, nsec) = elementary_sections(&bufs);
            conflict_order(&bufs, &span, nsec)
        }
    };
    let p = place(&bufs, &order, Fit::First, None).unwrap_or(Placement {
        offsets: vec![0; bufs.len()],
        height: 0,
    });
    let mut offsets = vec![0usize; buffers.len()];
    for (k, &i) in keep.iter().enumerate() {
        offsets[i] = p.offsets[k];
    }
    Placement {
        offsets,
        height: p.height,
    }
}

/// Places `buffers` greedily by size: [`greedy`] with [`GreedyOrder::Size`].
///
/// ```
/// use warmarena::planner::{greedy_by_size, lower_bound, Buffer};
/// let bufs = [Buffer::new(0, 2, 4), Buffer::new(1, 3, 8), Buffer::new(2, 4, 4)];
/// let p = greedy_by_size(&bufs);
/// assert_eq!(p.height, 12);
/// assert_eq!(lower_bound(&bufs), 12);
/// ```
pub fn greedy_by_size(buffers: &[Buffer]) -> Placement {
    greedy(buffers, GreedyOrder::Size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disjoint_buffers_share_offset_zero() {
        let bufs = [
            Buffer::new(0, 1, 5),
            Buffer::new(1, 2, 9),
            Buffer::new(2, 3, 7),
        ];
        let p = greedy_by_size(&bufs);
        assert_eq!(p.offsets, vec![0, 0, 0]);
        assert_eq!(p.height, 9);
    }
}
