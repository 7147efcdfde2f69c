//! Why an allocation was refused. Every refusal leaves the arena as it was.

/// A refused allocation or resize.
///
/// ```
/// use warmarena::{AllocError, ExecutionArena};
/// let arena = ExecutionArena::new();
/// assert_eq!(arena.allocate(0, 8).unwrap_err(), AllocError::ZeroSize);
/// assert!(matches!(arena.allocate(64, 3), Err(AllocError::BadAlignment { align: 3 })));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
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
    /// A resize asked for more than the buffer's capacity.
    BeyondCapacity {
        /// The length asked for.
        requested: usize,
        /// The buffer's capacity.
        capacity: usize,
    },
}

impl core::fmt::Display for AllocError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            AllocError::ZeroSize => write!(f, "zero-size allocation"),
            AllocError::BadAlignment { align } => {
                write!(f, "alignment {align} is not a power of two")
            }
            AllocError::UnsupportedAlignment { align, max } => {
                write!(f, "alignment {align} is above the supported {max}")
            }
            AllocError::SizeOverflow { size } => write!(f, "size {size} overflows when rounded"),
            AllocError::OutOfMemory { size, errno } => {
                write!(f, "out of memory for {size} bytes (errno {errno})")
            }
            AllocError::BeyondCapacity {
                requested,
                capacity,
            } => write!(f, "length {requested} exceeds capacity {capacity}"),
        }
    }
}

impl std::error::Error for AllocError {}
