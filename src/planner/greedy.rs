//! Greedy-by-size: the baseline every published planner is compared against.
//!
//! Buffers are taken largest first (ties: longer life first, then index) and
//! each goes at the lowest offset where it fits beside the already placed
//! buffers it conflicts with. This is the strategy of TFLite's and TVM's
//! greedy planners; [`solve`](super::solve) must beat it, and the benchmarks
//! report both.

use super::interval::{Buffer, Placement};

/// Conflict lists: `adj[i]` holds every buffer that conflicts with buffer `i`.
/// Built with a sweep over start times, O(n log n + edges).
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

/// Lowest offset at or above 0 where `size` bytes fit between the `(offset,
/// top)` ranges in `taken` (which it sorts).
pub(crate) fn lowest_fit(taken: &mut [(usize, usize)], size: usize) -> usize {
    taken.sort_unstable();
    let mut at = 0usize;
    for &(lo, hi) in taken.iter() {
        if lo >= at.saturating_add(size) {
            break;
        }
        at = at.max(hi);
    }
    at
}

/// Places `buffers` greedily by size (largest first, each at the lowest
/// offset that fits). Never fails; the result is valid but may be far above
/// the lower bound.
///
/// ```
/// use warmarena::planner::{greedy_by_size, lower_bound, Buffer};
/// let bufs = [Buffer::new(0, 2, 4), Buffer::new(1, 3, 8), Buffer::new(2, 4, 4)];
/// let p = greedy_by_size(&bufs);
/// assert_eq!(p.height, 12);
/// assert_eq!(lower_bound(&bufs), 12);
/// ```
pub fn greedy_by_size(buffers: &[Buffer]) -> Placement {
    let adj = conflicts(buffers);
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&i| {
        let b = buffers[i];
        (
            std::cmp::Reverse(b.size),
            std::cmp::Reverse(b.upper - b.lower),
            i,
        )
    });
    place_in_order(buffers, &adj, &order)
}

/// Places buffers one by one in `order`, each at its lowest fitting offset.
pub(crate) fn place_in_order(buffers: &[Buffer], adj: &[Vec<u32>], order: &[usize]) -> Placement {
    let mut offsets: Vec<Option<usize>> = vec![None; buffers.len()];
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let mut height = 0;
    for &i in order {
        let b = buffers[i];
        taken.clear();
        for &j in &adj[i] {
            if let Some(o) = offsets[j as usize] {
                taken.push((o, o.saturating_add(buffers[j as usize].size)));
            }
        }
        let at = if b.is_trivial() {
            0
        } else {
            lowest_fit(&mut taken, b.size)
        };
        offsets[i] = Some(at);
        if b.size > 0 {
            height = height.max(at.saturating_add(b.size));
        }
    }
    Placement {
        offsets: offsets.into_iter().map(|o| o.unwrap_or(0)).collect(),
        height,
    }
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
