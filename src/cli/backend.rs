//! Memory back ends the report runs side by side: warmarena's arena and the
//! allocators a runtime would otherwise use (the system allocator, mimalloc,
//! jemalloc), each used directly through `GlobalAlloc` so that none does work
//! the others skip.

use crate::{Allocation, ExecutionArena};
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;

/// One way of getting buffers for a run.
pub trait Backend {
    /// An owned buffer.
    type Buf;
    /// A short name for tables.
    fn name(&self) -> &'static str;
    /// A buffer of `size` bytes, 64-byte aligned.
    fn alloc(&self, size: usize) -> Option<Self::Buf>;
    /// The buffer's first byte.
    fn ptr(buf: &mut Self::Buf) -> *mut u8;
    /// Gives the buffer back.
    fn free(&self, buf: Self::Buf);
    /// System calls made so far, where the back end can count them.
    fn syscalls(&self) -> Option<u64> {
        None
    }
}

/// warmarena's execution arena.
pub struct ArenaBackend {
    /// The arena every buffer comes from.
    pub arena: ExecutionArena,
}

impl Backend for ArenaBackend {
    type Buf = Allocation;
    fn name(&self) -> &'static str {
        "warmarena"
    }
    fn alloc(&self, size: usize) -> Option<Allocation> {
        self.arena.allocate(size, 64).ok()
    }
    fn ptr(buf: &mut Allocation) -> *mut u8 {
        buf.as_mut_ptr()
    }
    fn free(&self, buf: Allocation) {
        drop(buf)
    }
    fn syscalls(&self) -> Option<u64> {
        Some(self.arena.stats().os.syscalls())
    }
}

/// A general-purpose allocator used through `GlobalAlloc`.
pub struct Peer<A: GlobalAlloc> {
    /// The allocator.
    pub alloc: A,
    /// Its name in tables.
    pub name: &'static str,
}

impl<A: GlobalAlloc> Backend for Peer<A> {
    type Buf = (NonNull<u8>, Layout);
    fn name(&self) -> &'static str {
        self.name
    }
    fn alloc(&self, size: usize) -> Option<Self::Buf> {
        let layout = Layout::from_size_align(size.max(1), 64).ok()?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { self.alloc.alloc(layout) };
        Some((NonNull::new(p)?, layout))
    }
    fn ptr(buf: &mut Self::Buf) -> *mut u8 {
        buf.0.as_ptr()
    }
    fn free(&self, buf: Self::Buf) {
        // SAFETY: the block came from this allocator with this layout.
        unsafe { self.alloc.dealloc(buf.0.as_ptr(), buf.1) }
    }
}
