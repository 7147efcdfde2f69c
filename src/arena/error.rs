//! Why an allocation was refused. Every refusal leaves the arena as it was.

/// A refused allocation or resize.
///
/// ```
/// use warmarena::{ArenaError, ExecutionArena};
/// let arena = ExecutionArena::new();
/// assert_eq!(arena.allocate(0, 8).unwrap_err(), ArenaError::ZeroSize);
/// assert!(matches!(arena.allocate(64, 3), Err(ArenaError::BadAlignment { align: 3 })));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArenaError {
    /// A request for zero bytes (arenas hand out real buffers only).
    ZeroSize,
    /// The alignment is not a power of two.
    BadAlignment {
        /// The alignment asked for.
        align: usize,
    },
    /// The alignment is a power of two above what arenas support.
    UnsupportedAlignment {
        /// The alignment asked for.
        align: usize,
        /// The largest supported alignment ([`crate::arena::MAX_ALIGN`]).
        max: usize,
    },
    /// Rounding the size up to its alignment or to whole pages overflows.
    SizeOverflow {
        /// The size asked for.
        size: usize,
    },
    /// The OS refused the mapping (or the heap refused metadata room).
    OutOfMemory {
        /// The size asked for.
        size: usize,
        /// The OS error number, 0 when the refusal came from metadata growth.
        errno: i32,
    },
    /// A `set_len` or `grow_in_place` asked for more than the buffer's capacity.
    BeyondCapacity {
        /// The length asked for.
        requested: usize,
        /// The buffer's capacity.
        capacity: usize,
    },
}

impl core::fmt::Display for ArenaError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ArenaError::ZeroSize => write!(f, "zero-size allocation"),
            ArenaError::BadAlignment { align } => {
                write!(f, "alignment {align} is not a power of two")
            }
            ArenaError::UnsupportedAlignment { align, max } => {
                write!(f, "alignment {align} is above the supported {max}")
            }
            ArenaError::SizeOverflow { size } => write!(f, "size {size} overflows when rounded"),
            ArenaError::OutOfMemory { size, errno } => {
                write!(f, "out of memory for {size} bytes (errno {errno})")
            }
            ArenaError::BeyondCapacity {
                requested,
                capacity,
            } => write!(f, "length {requested} exceeds capacity {capacity}"),
        }
    }
}

impl std::error::Error for ArenaError {}
