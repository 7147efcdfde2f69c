//! Size classes: request size → class in O(1) with bit arithmetic, class →
//! capacity, and the bounds that make reuse predictable.
//!
//! Classes are geometric with eight classes per power of two: sizes up to
//! 128 B round up to a multiple of 16 B; a size in `(2^e, 2^(e+1)]` rounds up
//! to a multiple of `2^(e-3)`. The rounding step is below an eighth of the
//! request, so internal waste is under 12.5 % for every size above 128 B. The
//! largest class holds 256 GiB; larger requests get a dedicated mapping.
//!
//! ```
//! use warmarena::size_class::{class_of, capacity};
//! let c = class_of(5000).unwrap();
//! assert_eq!(capacity(c), 5120);
//! assert!(capacity(c) - 5000 <= 5000 / 8);
//! ```

/// Index of a size class, `0..CLASS_COUNT`.
pub type Class = usize;

/// The number of size classes.
pub const CLASS_COUNT: usize = 256;

/// The smallest capacity and the alignment every class guarantees.
pub const MIN_CAPACITY: usize = 16;

/// Classes per doubling of the size.
const STEPS: usize = 8;
const STEP_BITS: u32 = 3;

/// Largest request served by a size class (256 GiB).
pub const MAX_CLASS_SIZE: usize = capacity(CLASS_COUNT - 1);

/// The class whose capacity is the smallest one ≥ `size`, or `None` when the
/// size is above [`MAX_CLASS_SIZE`]. A size of 0 maps to the smallest class.
///
/// ```
/// use warmarena::size_class::{class_of, capacity, MAX_CLASS_SIZE};
/// assert_eq!(capacity(class_of(1).unwrap()), 16);
/// assert_eq!(capacity(class_of(129).unwrap()), 144);
/// assert!(class_of(MAX_CLASS_SIZE + 1).is_none());
/// ```
#[inline]
pub const fn class_of(size: usize) -> Option<Class> {
    if size == 0 {
        return Some(0);
    }
    if size > MAX_CLASS_SIZE {
        return None;
    }
    Some(class_of_classed(size))
}

/// [`class_of`] for a size known to be in `1..=MAX_CLASS_SIZE` (the
/// arena's warm path, which checked the range already): no `Option`.
#[inline(always)]
pub(crate) const fn class_of_classed(size: usize) -> Class {
    let m = size - 1;
    if m < 1024 {
        // Up to 1 KiB a class depends on `m >> 4` alone: one load.
        return SMALL_CLASS_OF[m >> 4] as Class;
    }
    class_by_formula(m)
}

/// Classes of sizes `1..=1024`, by `(size - 1) >> 4`.
const SMALL_CLASS_OF: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = class_by_formula(i << 4) as u8;
        i += 1;
    }
    t
};

/// The class of a size `m + 1`, computed.
#[inline(always)]
const fn class_by_formula(m: usize) -> Class {
    if m < 128 {
        // 16-byte steps up to 128 bytes.
        return m >> 4;
    }
    // m in [2^e, 2^(e+1)): class STEPS * (e - 6) plus the top three bits
    // after the leading one, i.e. STEPS * (e - 7) + (m >> (e - 3)).
    let e = (usize::BITS - 1 - m.leading_zeros()) as usize;
    STEPS * e - 7 * STEPS + (m >> (e - STEP_BITS as usize))
}

/// The capacity in bytes of class `c` (`c < CLASS_COUNT`).
///
/// ```
/// assert_eq!(warmarena::size_class::capacity(0), 16);
/// assert_eq!(warmarena::size_class::capacity(15), 256);
/// ```
#[inline]
pub const fn capacity(c: Class) -> usize {
    // One load; the mask keeps any index in range (`CLASS_COUNT` is a
    // power of two), so no bounds check and no panic.
    CAPACITIES[c & (CLASS_COUNT - 1)]
}

/// Every class's capacity, computed once at compile time.
const CAPACITIES: [usize; CLASS_COUNT] = {
    let mut t = [0usize; CLASS_COUNT];
    let mut c = 0;
    while c < CLASS_COUNT {
        t[c] = capacity_by_formula(c);
        c += 1;
    }
    t
};

/// The capacity of class `c`, computed.
const fn capacity_by_formula(c: Class) -> usize {
    if c < STEPS {
        return (c + 1) * 16;
    }
    let k = c - STEPS;
    let e = 7 + k / STEPS;
    let m = k % STEPS;
    (STEPS + m + 1) << (e - STEP_BITS as usize)
}

/// The largest class a request of class `c` may be served from: capacity at
/// most twice `capacity(c)`, so reuse never wastes more than half a buffer.
///
/// ```
/// use warmarena::size_class::{capacity, max_fit_class};
/// assert_eq!(capacity(max_fit_class(20)), 2 * capacity(20));
/// ```
#[inline]
pub const fn max_fit_class(c: Class) -> Class {
    let hi = if c < STEPS {
        // capacities 16..128: twice of (c+1)*16 is a multiple of 16 up to 256.
        match class_of(capacity(c) * 2) {
            Some(x) => x,
            None => CLASS_COUNT - 1,
        }
    } else {
        c + STEPS
    };
    if hi >= CLASS_COUNT {
        CLASS_COUNT - 1
    } else {
        hi
    }
}

/// The effective size to classify for a request of `size` bytes at `align`:
/// `size` rounded up to a multiple of `align` (at least `align`), so that a
/// class's buffers laid end to end from an aligned base are all aligned.
/// `None` on overflow or when `align` is not a power of two.
///
/// ```
/// use warmarena::size_class::aligned_size;
/// assert_eq!(aligned_size(10, 64), Some(64));
/// assert_eq!(aligned_size(usize::MAX, 4096), None);
/// ```
#[inline]
pub const fn aligned_size(size: usize, align: usize) -> Option<usize> {
    if !align.is_power_of_two() {
        return None;
    }
    let s = if size < align { align } else { size };
    match s.checked_add(align - 1) {
        Some(v) => Some(v & !(align - 1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_zero_and_small_sizes() {
        assert_eq!(class_of(0), Some(0));
        for s in 1..=128usize {
            let c = class_of(s).unwrap();
            assert!(capacity(c) >= s);
            assert!(capacity(c) - s < 16);
        }
    }

    #[test]
    fn waste_is_below_an_eighth_above_128_bytes() {
        let mut s = 129usize;
        while s < (1usize << 40) {
            for probe in [s, s + 1, s * 2 - 1, s + s / 3] {
                if let Some(c) = class_of(probe) {
                    let cap = capacity(c);
                    assert!(cap >= probe, "{probe}");
                    assert!((cap - probe) * 8 <= probe, "waste at {probe}: {cap}");
                    if probe >= 4096 {
                        assert!((cap - probe) as f64 <= probe as f64 * 0.125);
                    }
                }
            }
            s = s * 5 / 4 + 1;
        }
    }

    #[test]
    fn exhaustive_up_to_64k_is_smallest_fitting_class() {
        let top = if cfg!(miri) { 4096 } else { 1 << 16 };
        for s in 0..top {
            let c = class_of(s).unwrap();
            assert!(capacity(c) >= s);
            if c > 0 {
                assert!(capacity(c - 1) < s.max(1), "class {c} not minimal for {s}");
            }
        }
    }

    #[test]
    fn capacities_are_strictly_increasing_and_round_trip() {
        for c in 0..CLASS_COUNT {
            assert_eq!(class_of(capacity(c)), Some(c));
            if c > 0 {
                assert!(capacity(c) > capacity(c - 1));
            }
            assert_eq!(capacity(c) % MIN_CAPACITY, 0);
        }
    }

    #[test]
    fn covers_at_least_64_gib() {
        const { assert!(MAX_CLASS_SIZE >= 64 << 30) };
        assert!(class_of(64 << 30).is_some());
        assert_eq!(class_of(MAX_CLASS_SIZE), Some(CLASS_COUNT - 1));
        assert_eq!(class_of(MAX_CLASS_SIZE + 1), None);
        assert_eq!(class_of(usize::MAX), None);
    }

    #[test]
    fn max_fit_is_at_most_twice() {
        for c in 0..CLASS_COUNT {
            let hi = max_fit_class(c);
            assert!(hi >= c);
            assert!(capacity(hi) <= 2 * capacity(c));
            if hi + 1 < CLASS_COUNT {
                assert!(capacity(hi + 1) > 2 * capacity(c));
            }
        }
    }

    #[test]
    fn aligned_size_gives_aligned_capacities() {
        for shift in 4..=21u32 {
            let align = 1usize << shift;
            for size in [1usize, align - 1, align, align + 1, 3 * align + 7, 100_000] {
                let s = aligned_size(size, align).unwrap();
                let c = class_of(s).unwrap();
                assert_eq!(capacity(c) % align, 0, "size {size} align {align}");
            }
        }
        assert_eq!(aligned_size(8, 3), None);
    }
}
