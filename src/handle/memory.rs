//! [`ValueMemory`]: what holds one value of a run.

use super::{Allocation, IoLease};
use crate::arena::ArenaKind;

/// The storage behind one value: a buffer the value owns, a shared exported
/// buffer, or a caller's bytes borrowed for the run. Dropping a `Borrowed`
/// value touches no arena: borrowed memory never enters a free list.
///
/// ```
/// use warmarena::{handle::ValueMemory, IoArena};
/// let io = IoArena::new();
/// let input = vec![1u8; 64];
/// let m = ValueMemory::Borrowed(&input);
/// assert_eq!(m.kind(), None);
/// assert_eq!(m.as_ptr(), input.as_ptr());
/// drop(m);
/// assert_eq!(io.stats().retained_buffers, 0);
/// ```
#[derive(Debug)]
pub enum ValueMemory<'a> {
    /// An arena buffer owned by the value.
    Owned(Allocation),
    /// An exported I/O buffer, shared with the caller.
    Leased(IoLease),
    /// A caller's bytes, valid for the run.
    Borrowed(&'a [u8]),
}

/// The former name of [`ValueMemory`].
#[deprecated(since = "0.2.0", note = "renamed to `ValueMemory`")]
pub type Memory<'a> = ValueMemory<'a>;

impl ValueMemory<'_> {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            ValueMemory::Owned(a) => a.as_slice(),
            ValueMemory::Leased(l) => l.as_slice(),
            ValueMemory::Borrowed(b) => b,
        }
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr()
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether the value holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The arena that owns the storage; `None` for borrowed bytes.
    pub fn kind(&self) -> Option<ArenaKind> {
        match self {
            ValueMemory::Owned(a) => Some(a.kind()),
            ValueMemory::Leased(l) => Some(l.kind()),
            ValueMemory::Borrowed(_) => None,
        }
    }
}
