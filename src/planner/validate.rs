//! Checks that a placement or an activation plan is safe to run.
//!
//! [`validate_placement`] checks the interval problem (no two conflicting
//! buffers share a byte, alignment, height; a buffer never live is exempt
//! from the height) in O(n log n) with a sweep over
//! time that keeps the live buffers ordered by offset: the live set is
//! pairwise disjoint, so a new buffer can only overlap its neighbours there.
//! [`validate`](super::validate) checks a whole [`ActivationPlan`](super::ActivationPlan)
//! against its graph.

use std::collections::BTreeMap;
use std::fmt;

use super::interval::{Buffer, Placement};

/// A violated rule of a placement or a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    if offsets.len() != buffers.len() {
        return Err(ValidateError::LengthMismatch);
    }
    let align = alignment.max(1);
    let mut order: Vec<usize> = Vec::with_capacity(buffers.len());
    for (i, (b, &o)) in buffers.iter().zip(offsets).enumerate() {
        if o % align != 0 {
            return Err(ValidateError::Misaligned { index: id(i) });
        }
        match o.checked_add(b.size) {
            Some(top) if b.is_trivial() || top <= height => {}
            _ => return Err(ValidateError::AboveHeight { index: id(i) }),
        }
        if !b.is_trivial() {
            order.push(i);
        }
    }
    // Buffers by start, and by end time to retire them (radix sorts);
    // live buffers by (offset, index).
    let by = |key: fn(&Buffer) -> usize| {
        let mut v: Vec<(u64, u32)> = order
            .iter()
            .map(|&i| (key(&buffers[i]) as u64, i as u32))
            .collect();
        super::radix::sort_by_key(&mut v);
        v.into_iter().map(|e| e.1 as usize).collect::<Vec<usize>>()
    };
    let ends = by(|b| b.upper);
    let order = by(|b| b.lower);
    let mut live: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let mut next_end = 0;
    for &i in &order {
        let b = buffers[i];
        while next_end < ends.len() && buffers[ends[next_end]].upper <= b.lower {
            let j = ends[next_end];
            live.remove(&(offsets[j], j));
            next_end += 1;
        }
        let (lo, hi) = (offsets[i], offsets[i] + b.size);
        if let Some((&(_, j), &top)) = live.range(..(lo, i)).next_back() {
            if top > lo {
                return Err(ValidateError::Overlap { a: id(j), b: id(i) });
            }
        }
        if let Some((&(o, j), _)) = live.range((lo, i)..).next() {
            if o < hi {
                return Err(ValidateError::Overlap { a: id(i), b: id(j) });
            }
        }
        live.insert((lo, i), hi);
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
}
