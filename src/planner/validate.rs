//! Checks that a placement or an activation plan is safe to run.
//!
//! [`validate_placement`] checks the interval problem (no two conflicting
//! buffers share a byte, alignment, height; a buffer never live is exempt
//! from the height) in O(n log n) with a sweep over
//! time that keeps the live buffers ordered by offset (as bits over their
//! rank in offset order): the live set is pairwise disjoint, so a new
//! buffer can only overlap its neighbours there. Three radix sorts and the
//! sweep, no tree: its cost per buffer is steady enough to reserve for.
//! [`validate`](super::validate()) checks a whole [`ActivationPlan`](super::ActivationPlan)
//! against its graph.

use std::fmt;

use super::interval::{Buffer, Placement};
use super::radix::{sort_pairs, Sorted};
use super::rankset::RankSet;

/// A violated rule of a placement or a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValidateError {
    /// The placement has a different number of offsets than there are buffers.
    LengthMismatch,
    /// Two buffers live at the same time share bytes.
    Overlap {
        /// First buffer (index in the problem, or value id in a plan).
        a: usize,
        /// Second buffer.
        b: usize,
    },
    /// An offset is not a multiple of the alignment.
    Misaligned {
        /// Buffer index or value id.
        index: usize,
    },
    /// `offset + size` exceeds the reported height (or overflows).
    AboveHeight {
        /// Buffer index or value id.
        index: usize,
    },
    /// A graph output's memory is used by another value after the output is defined.
    OutputReused {
        /// The graph output.
        output: usize,
        /// The value that reuses its bytes.
        by: usize,
    },
    /// A view's buffer owner dies before the view's last use.
    ViewOutlivesSource {
        /// The view value.
        view: usize,
    },
    /// A value the plan should place has no slot, or a slot it should not have.
    Unplaced {
        /// The value.
        value: usize,
    },
}

impl fmt::Display for ValidateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidateError::LengthMismatch => write!(f, "one offset per buffer expected"),
            ValidateError::Overlap { a, b } => {
                write!(f, "{a} and {b} are live together and overlap")
            }
            ValidateError::Misaligned { index } => write!(f, "{index} is misaligned"),
            ValidateError::AboveHeight { index } => write!(f, "{index} ends above the height"),
            ValidateError::OutputReused { output, by } => {
                write!(f, "graph output {output} is overwritten by {by}")
            }
            ValidateError::ViewOutlivesSource { view } => {
                write!(f, "view {view} outlives its source buffer")
            }
            ValidateError::Unplaced { value } => write!(f, "value {value} is not placed correctly"),
        }
    }
}

impl std::error::Error for ValidateError {}

/// Checks a placement: conflicting buffers are disjoint in memory, every
/// offset is a multiple of `alignment` (1 for none), and every buffer that is
/// ever live ends at or below `placement.height`.
///
/// ```
/// use warmarena::planner::{validate_placement, Buffer, Placement};
/// let bufs = [Buffer::new(0, 2, 8), Buffer::new(1, 3, 8)];
/// let good = Placement { offsets: vec![0, 8], height: 16 };
/// assert!(validate_placement(&bufs, &good, 8).is_ok());
/// let bad = Placement { offsets: vec![0, 4], height: 16 };
/// assert!(validate_placement(&bufs, &bad, 1).is_err());
/// ```
pub fn validate_placement(
    buffers: &[Buffer],
    placement: &Placement,
    alignment: usize,
) -> Result<(), ValidateError> {
    validate_with_ids(
        buffers,
        &placement.offsets,
        placement.height,
        alignment,
        |i| i,
    )
}

/// [`validate_placement`] reporting buffer `i` as `id(i)`.
pub(crate) fn validate_with_ids(
    buffers: &[Buffer],
    offsets: &[usize],
    height: usize,
    alignment: usize,
    id: impl Fn(usize) -> usize,
) -> Result<(), ValidateError> {
    let orders = TimeOrders::new(buffers);
    check(buffers, &orders, offsets, height, alignment, id)
}

/// The non-trivial buffers by start and by end time (radix sorts, ties by
/// index), as `(time, index)`: what the sweep of [`check`] walks. They
/// depend on the buffers alone, so a caller with a deadline builds them
/// before the placement exists, and what is left after the placement is
/// one sort, a few linear passes and the sweep.
pub(crate) struct TimeOrders {
    starts: Sorted,
    ends: Sorted,
}

impl TimeOrders {
    /// The orders of `buffers`' non-trivial members.
    pub(crate) fn new(buffers: &[Buffer]) -> Self {
        let by = |key: fn(&Buffer) -> usize| {
            sort_pairs(
                buffers
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| !b.is_trivial())
                    .map(move |(i, b)| (key(b) as u64, i as u32)),
            )
        };
        TimeOrders {
            starts: by(|b| b.lower),
            ends: by(|b| b.upper),
        }
    }
}

/// [`validate_with_ids`] with the time orders already built (from the
/// same `buffers`). The sweep keeps the live buffers in a [`RankSet`] by
/// their rank in (offset, index) order: the live set is pairwise disjoint,
/// so a new buffer can only overlap its neighbours there. Everything the
/// sweep reads is laid out by rank or in time order beforehand (gathers
/// whose loads do not wait on each other), so it walks flat arrays.
pub(crate) fn check(
    buffers: &[Buffer],
    orders: &TimeOrders,
    offsets: &[usize],
    height: usize,
    alignment: usize,
    id: impl Fn(usize) -> usize,
) -> Result<(), ValidateError> {
    if offsets.len() != buffers.len() {
        return Err(ValidateError::LengthMismatch);
    }
    let align = alignment.max(1);
    for (i, (b, &o)) in buffers.iter().zip(offsets).enumerate() {
        if o % align != 0 {
            return Err(ValidateError::Misaligned { index: id(i) });
        }
        match o.checked_add(b.size) {
            Some(top) if b.is_trivial() || top <= height => {}
            _ => return Err(ValidateError::AboveHeight { index: id(i) }),
        }
    }
    // Ranks in (offset, index) order (the radix sort is stable), each
    // rank's byte range, and the ranks in start and in end order.
    let by_offset = sort_pairs(
        buffers
            .iter()
            .zip(offsets)
            .enumerate()
            .filter(|(_, (b, _))| !b.is_trivial())
            .map(|(i, (_, &o))| (o as u64, i as u32)),
    );
    let mut rank = vec![0u32; buffers.len()];
    let bytes: Vec<(usize, usize)> = by_offset
        .iter()
        .enumerate()
        .map(|(r, (o, i))| {
            rank[i as usize] = r as u32;
            (o as usize, o as usize + buffers[i as usize].size)
        })
        .collect();
    let ranks = |v: &Sorted| -> Vec<u32> { v.payloads().map(|i| rank[i as usize]).collect() };
    let (start_rank, end_rank) = (ranks(&orders.starts), ranks(&orders.ends));
    drop(rank);
    let holder = |r: usize| id(by_offset.get(r).1 as usize);
    let mut live = RankSet::new(bytes.len());
    let mut e = 0;
    for ((t, _), &r) in orders.starts.iter().zip(&start_rank) {
        while e < end_rank.len() && orders.ends.get(e).0 <= t {
            live.remove(end_rank[e] as usize);
            e += 1;
        }
        let r = r as usize;
        let (lo, hi) = bytes[r];
        if let Some(p) = r.checked_sub(1).and_then(|q| live.at_or_before(q)) {
            if bytes[p].1 > lo {
                return Err(ValidateError::Overlap {
                    a: holder(p),
                    b: holder(r),
                });
            }
        }
        if let Some(s) = live.at_or_after(r + 1) {
            if bytes[s].0 < hi {
                return Err(ValidateError::Overlap {
                    a: holder(r),
                    b: holder(s),
                });
            }
        }
        live.insert(r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_overlap_and_misalignment() {
        let bufs = [
            Buffer::new(0, 10, 4),
            Buffer::new(5, 6, 4),
            Buffer::new(10, 12, 4),
        ];
        let ok = Placement {
            offsets: vec![0, 4, 0],
            height: 8,
        };
        assert_eq!(validate_placement(&bufs, &ok, 4), Ok(()));
        let clash = Placement {
            offsets: vec![0, 2, 0],
            height: 8,
        };
        assert_eq!(
            validate_placement(&bufs, &clash, 1),
            Err(ValidateError::Overlap { a: 0, b: 1 })
        );
        assert_eq!(
            validate_placement(&bufs, &clash, 4),
            Err(ValidateError::Misaligned { index: 1 })
        );
        let high = Placement {
            offsets: vec![0, 4, 0],
            height: 7,
        };
        assert_eq!(
            validate_placement(&bufs, &high, 1),
            Err(ValidateError::AboveHeight { index: 1 })
        );
    }

    #[test]
    fn same_offset_both_live_is_an_overlap() {
        let bufs = [Buffer::new(0, 3, 4), Buffer::new(1, 2, 4)];
        let p = Placement {
            offsets: vec![0, 0],
            height: 4,
        };
        assert!(validate_placement(&bufs, &p, 1).is_err());
    }

    #[test]
    fn agrees_with_checking_every_pair() {
        let mut rng = crate::planner::rng::Rng::new(43);
        let (rounds, n) = if cfg!(miri) { (20, 12) } else { (400, 60) };
        let (mut bad, mut good) = (0, 0);
        for round in 0..rounds {
            let bufs: Vec<Buffer> = (0..n)
                .map(|_| {
                    let l = rng.below(40);
                    Buffer::new(l, l + rng.below(12), rng.below(9))
                })
                .collect();
            // Offsets from a valid packing (online best fit), some moved.
            let mut offsets = crate::planner::online::online_best_fit(&bufs, None)
                .unwrap()
                .offsets;
            if round % 2 == 1 {
                // One buffer onto another it is live with: an overlap for
                // certain (small instances, as under Miri, rarely get one
                // by chance).
                let pair = (0..n)
                    .flat_map(|a| (0..n).map(move |b| (a, b)))
                    .find(|&(a, b)| {
                        a != b
                            && bufs[a].size > 0
                            && bufs[b].size > 0
                            && bufs[a].conflicts(&bufs[b])
                    });
                if let Some((a, b)) = pair {
                    offsets[a] = offsets[b];
                }
            } else {
                for _ in 0..rng.below(3) {
                    let k = rng.below(n);
                    offsets[k] = rng.below(64);
                }
            }
            let height = bufs
                .iter()
                .zip(&offsets)
                .map(|(b, o)| o + b.size)
                .max()
                .unwrap();
            let p = Placement { offsets, height };
            let clash = (0..n).any(|a| {
                (a + 1..n).any(|b| {
                    let (oa, ob) = (p.offsets[a], p.offsets[b]);
                    bufs[a].conflicts(&bufs[b]) && oa < ob + bufs[b].size && ob < oa + bufs[a].size
                })
            });
            let got = validate_placement(&bufs, &p, 1);
            assert_eq!(got.is_err(), clash, "{bufs:?} {p:?} {got:?}");
            if let Err(ValidateError::Overlap { a, b }) = got {
                assert!(bufs[a].conflicts(&bufs[b]));
                bad += 1;
            } else {
                good += 1;
            }
        }
        assert!(bad > rounds / 10 && good > rounds / 10, "{bad} {good}");
    }
}
