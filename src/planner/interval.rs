//! The interval/offset problem every plan reduces to.
//!
//! A [`Buffer`] lives over the half-open time range `[lower, upper)` and needs
//! `size` bytes. Two buffers *conflict* when both have bytes and their ranges
//! overlap; conflicting buffers must get disjoint byte ranges. A [`Placement`]
//! gives every buffer an offset; its height is the largest `offset + size`.
//! No placement is lower than [`lower_bound`], the largest total size live at
//! one moment.

use std::fmt;

/// One buffer of the interval problem: live over `[lower, upper)`, `size` bytes.
///
/// ```
/// use warmarena::planner::Buffer;
/// let a = Buffer::new(0, 4, 64);
/// let b = Buffer::new(4, 8, 64);
/// assert!(!a.conflicts(&b)); // half-open: `a` is dead when `b` is born
/// assert!(a.conflicts(&Buffer::new(3, 5, 8)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buffer {
    /// First moment the buffer is live.
    pub lower: usize,
    /// First moment the buffer is dead again (exclusive end).
    pub upper: usize,
    /// Bytes the buffer needs.
    pub size: usize,
}

impl Buffer {
    /// A buffer live over `[lower, upper)` needing `size` bytes.
    pub const fn new(lower: usize, upper: usize, size: usize) -> Self {
        Buffer { lower, upper, size }
    }

    /// True when the buffer occupies memory at some moment (non-empty range, non-zero size).
    pub const fn is_trivial(&self) -> bool {
        self.size == 0 || self.lower >= self.upper
    }

    /// True when `self` and `other` must not share bytes: both non-trivial and
    /// their half-open ranges overlap.
    pub const fn conflicts(&self, other: &Buffer) -> bool {
        !self.is_trivial()
            && !other.is_trivial()
            && self.lower < other.upper
            && other.lower < self.upper
    }
}

/// Why an interval problem or a placement was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IntervalError {
    /// A buffer's range ends before it starts.
    ReversedRange {
        /// Index of the buffer.
        index: usize,
    },
    /// The sum of all sizes exceeds `isize::MAX` (the largest allocation
    /// Rust can make), or an `offset + size` does not fit in `usize`.
    Overflow,
    /// A placement does not have one offset per buffer.
    LengthMismatch {
        /// Buffers in the problem.
        buffers: usize,
        /// Offsets in the placement.
        offsets: usize,
    },
}

impl fmt::Display for IntervalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntervalError::ReversedRange { index } => {
                write!(f, "buffer {index}: upper is below lower")
            }
            IntervalError::Overflow => write!(f, "total size overflows usize"),
            IntervalError::LengthMismatch { buffers, offsets } => {
                write!(f, "{buffers} buffers but {offsets} offsets")
            }
        }
    }
}

impl std::error::Error for IntervalError {}

/// Checks that every range is ordered and that the sum of all sizes fits in
/// `usize` (so that no offset the planner computes can overflow), and returns
/// that sum: the bytes a one-buffer-per-value run would need.
///
/// ```
/// use warmarena::planner::{check_buffers, Buffer};
/// assert_eq!(check_buffers(&[Buffer::new(0, 2, 8), Buffer::new(1, 3, 8)]), Ok(16));
/// assert!(check_buffers(&[Buffer::new(3, 2, 8)]).is_err());
/// ```
pub fn check_buffers(buffers: &[Buffer]) -> Result<usize, IntervalError> {
    let mut total: usize = 0;
    for (index, b) in buffers.iter().enumerate() {
        if b.upper < b.lower {
            return Err(IntervalError::ReversedRange { index });
        }
        total = total.checked_add(b.size).ok_or(IntervalError::Overflow)?;
    }
    // No allocation can exceed `isize::MAX` bytes (Rust's `Layout` rule),
    // so neither can a plan's height; and every `offset + size` the passes
    // compute stays far from wrapping. (The fuzz target found a skyline
    // placement that overlapped when the sizes summed to `usize::MAX`.)
    if total > isize::MAX as usize {
        return Err(IntervalError::Overflow);
    }
    Ok(total)
}

/// The largest total size of buffers live at one moment. No placement of
/// `buffers` is lower. Assumes [`check_buffers`] passed (sums cannot overflow).
///
/// ```
/// use warmarena::planner::{lower_bound, Buffer};
/// let bufs = [Buffer::new(0, 4, 10), Buffer::new(2, 6, 5), Buffer::new(4, 8, 7)];
/// assert_eq!(lower_bound(&bufs), 15); // [2,4): 10 + 5; [4,6): 5 + 7 = 12
/// ```
pub fn lower_bound(buffers: &[Buffer]) -> usize {
    let mut events: Vec<(usize, bool, usize)> = Vec::with_capacity(buffers.len() * 2);
    for b in buffers.iter().filter(|b| !b.is_trivial()) {
        // `false` sorts first: a buffer ending at t is gone before one starting at t.
        events.push((b.lower, true, b.size));
        events.push((b.upper, false, b.size));
    }
    events.sort_unstable();
    let (mut live, mut peak) = (0usize, 0usize);
    for (_, start, size) in events {
        if start {
            live = live.saturating_add(size);
            peak = peak.max(live);
        } else {
            live = live.saturating_sub(size);
        }
    }
    peak
}

/// An offset for every buffer of a problem, and the resulting height.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `offsets[i]` is where buffer `i` starts.
    pub offsets: Vec<usize>,
    /// Largest `offset + size` (0 when there are no bytes).
    pub height: usize,
}

impl Placement {
    /// Builds a placement from offsets, computing its height.
    ///
    /// ```
    /// use warmarena::planner::{Buffer, Placement};
    /// let p = Placement::from_offsets(&[Buffer::new(0, 1, 8), Buffer::new(0, 1, 4)], vec![0, 8]);
    /// assert_eq!(p.unwrap().height, 12);
    /// ```
    pub fn from_offsets(buffers: &[Buffer], offsets: Vec<usize>) -> Result<Self, IntervalError> {
        if offsets.len() != buffers.len() {
            return Err(IntervalError::LengthMismatch {
                buffers: buffers.len(),
                offsets: offsets.len(),
            });
        }
        let mut height = 0usize;
        for (b, &o) in buffers.iter().zip(&offsets) {
            if b.size > 0 {
                height = height.max(o.checked_add(b.size).ok_or(IntervalError::Overflow)?);
            }
        }
        Ok(Placement { offsets, height })
    }
}

/// Compresses the times of non-trivial buffers into elementary sections
/// (time cut at every start and end; the decision search's clique sections
/// are coarser, see `decide::clique_sections`):
/// `span[i] = (first, last + 1)` section indices of buffer `i` (`(0, 0)` for
/// trivial buffers). Returns the spans and the number of sections.
pub(crate) fn elementary_sections(buffers: &[Buffer]) -> (Vec<(u32, u32)>, usize) {
    // Every start and end, tagged `2 * buffer + (0 start, 1 end)`, sorted
    // by time (radix: a million buffers sort in a few tens of ms); each
    // takes the number of distinct times before it.
    let points = super::radix::sort_pairs(
        buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.is_trivial())
            .flat_map(|(i, b)| {
                let tag = 2 * i as u32;
                [(b.lower as u64, tag), (b.upper as u64, tag + 1)]
            }),
    );
    let mut spans = vec![(0u32, 0u32); buffers.len()];
    let mut distinct = 0u32;
    let mut prev = None;
    for (t, tag) in points.iter() {
        if prev != Some(t) {
            if prev.is_some() {
                distinct += 1;
            }
            prev = Some(t);
        }
        let s = &mut spans[(tag / 2) as usize];
        if tag % 2 == 0 {
            s.0 = distinct;
        } else {
            s.1 = distinct;
        }
    }
    let count = if points.is_empty() {
        0
    } else {
        distinct as usize + 1
    };
    (spans, count.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_bound_respects_half_open_ranges() {
        let bufs = [Buffer::new(0, 2, 3), Buffer::new(2, 4, 5)];
        assert_eq!(lower_bound(&bufs), 5);
        assert_eq!(lower_bound(&[]), 0);
        assert_eq!(lower_bound(&[Buffer::new(1, 1, 9)]), 0);
    }

    #[test]
    fn sections_compress_times() {
        let bufs = [
            Buffer::new(0, 10, 1),
            Buffer::new(5, 20, 1),
            Buffer::new(7, 7, 1),
        ];
        let (spans, n) = elementary_sections(&bufs);
        assert_eq!(n, 3);
        assert_eq!(spans, vec![(0, 2), (1, 3), (0, 0)]);
    }

    #[test]
    fn overflow_is_an_error() {
        let bufs = [Buffer::new(0, 1, usize::MAX), Buffer::new(0, 1, 1)];
        assert_eq!(check_buffers(&bufs), Err(IntervalError::Overflow));
    }
}
