//! Memory back ends the report runs side by side: warmarena's arenas and the
//! allocators a runtime would otherwise use (the system allocator, mimalloc,
//! jemalloc), each used directly through `GlobalAlloc` so that none does work
//! the others skip. Every back end gets the same requests; only warmarena
//! uses the role (intermediate or output), because routing is its job.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::NonNull;
use warmarena::stats::ArenaStats;
use warmarena::{Allocation, ExecutionArena, IoArena, IoLease};

/// One way of getting buffers for a run.
pub trait Backend {
    /// A buffer owned by the run.
    type Buf;
    /// A buffer handed to the caller; dropping it gives it back.
    type Out;
    /// A short name for tables.
    fn name(&self) -> &'static str;
    /// A run of shape variant `variant` starts.
    fn begin_run(&self, _variant: usize) {}
    /// Runs of each shape, beyond the cold one, before the back end is warm
    /// (pattern mode learns in a shape's first run and builds its block in
    /// the second).
    fn extra_warm_up_runs(&self) -> usize {
        0
    }
    /// The run ended (its outputs are exported).
    fn end_run(&self) {}
    /// A 64-byte aligned buffer of `size` bytes; `output` says it will leave the run.
    fn alloc(&self, size: usize, output: bool) -> Option<Self::Buf>;
    /// The buffer's first byte.
    fn ptr(buf: &mut Self::Buf) -> *mut u8;
    /// Gives a run-owned buffer back.
    fn free(&self, buf: Self::Buf);
    /// Hands an output buffer to the caller (no copy); `None` if the buffer
    /// cannot leave the run (it was not allocated as an output).
    fn export(&self, buf: Self::Buf) -> Option<Self::Out>;
    /// System calls made so far, where the back end can count them.
    fn syscalls(&self) -> Option<u64> {
        None
    }
    /// Bytes obtained from the OS so far, where the back end can count them.
    fn system_bytes(&self) -> Option<u64> {
        None
    }
    /// Payload copies made so far.
    fn copies(&self) -> u64 {
        0
    }
    /// Releases idle memory to the OS on request (`trim`); bytes released if known.
    fn trim(&self) -> Option<usize>;
    /// Execution and I/O arena statistics, for warmarena.
    fn arena_stats(&self) -> Option<(ArenaStats, ArenaStats)> {
        None
    }
}

/// warmarena: intermediates in an execution arena, outputs in an I/O arena.
#[derive(Clone, Default)]
pub struct ArenaBackend {
    /// Intermediates and workspaces.
    pub exec: ExecutionArena,
    /// Outputs.
    pub io: IoArena,
}

impl Backend for ArenaBackend {
    type Buf = Allocation;
    type Out = IoLease;
    fn name(&self) -> &'static str {
        "warmarena"
    }
    fn alloc(&self, size: usize, output: bool) -> Option<Allocation> {
        if output {
            self.io.allocate(size, 64).ok()
        } else {
            self.exec.allocate(size, 64).ok()
        }
    }
    fn ptr(buf: &mut Allocation) -> *mut u8 {
        buf.as_mut_ptr()
    }
    fn free(&self, buf: Allocation) {
        drop(buf)
    }
    fn export(&self, buf: Allocation) -> Option<IoLease> {
        buf.into_lease().ok()
    }
    fn syscalls(&self) -> Option<u64> {
        Some(self.exec.stats().os.syscalls() + self.io.stats().os.syscalls())
    }
    fn system_bytes(&self) -> Option<u64> {
        Some(self.exec.stats().os.mapped_bytes + self.io.stats().os.mapped_bytes)
    }
    fn copies(&self) -> u64 {
        self.exec.stats().copies + self.io.stats().copies
    }
    fn trim(&self) -> Option<usize> {
        Some(self.exec.trim() + self.io.trim())
    }
    fn arena_stats(&self) -> Option<(ArenaStats, ArenaStats)> {
        Some((self.exec.stats(), self.io.stats()))
    }
}

/// warmarena in pattern mode: the execution arena learns the first run of
/// each shape (keyed by the shape variant) and serves later runs of it from
/// one planned block; no graph is given. Outputs as [`ArenaBackend`].
#[derive(Clone)]
pub struct PatternBackend(pub ArenaBackend);

impl Default for PatternBackend {
    fn default() -> Self {
        PatternBackend(ArenaBackend {
            exec: ExecutionArena::with_config(warmarena::ArenaConfig::default().pattern(true)),
            io: IoArena::new(),
        })
    }
}

impl Backend for PatternBackend {
    type Buf = Allocation;
    type Out = IoLease;
    fn name(&self) -> &'static str {
        "pattern"
    }
    fn begin_run(&self, variant: usize) {
        self.0.exec.begin_run_keyed(variant as u64);
    }
    fn extra_warm_up_runs(&self) -> usize {
        1
    }
    fn alloc(&self, size: usize, output: bool) -> Option<Allocation> {
        self.0.alloc(size, output)
    }
    fn ptr(buf: &mut Allocation) -> *mut u8 {
        buf.as_mut_ptr()
    }
    fn free(&self, buf: Allocation) {
        drop(buf)
    }
    fn export(&self, buf: Allocation) -> Option<IoLease> {
        self.0.export(buf)
    }
    fn syscalls(&self) -> Option<u64> {
        self.0.syscalls()
    }
    fn system_bytes(&self) -> Option<u64> {
        self.0.system_bytes()
    }
    fn copies(&self) -> u64 {
        self.0.copies()
    }
    fn trim(&self) -> Option<usize> {
        self.0.trim()
    }
    fn arena_stats(&self) -> Option<(ArenaStats, ArenaStats)> {
        self.0.arena_stats()
    }
}

/// A general-purpose allocator used through `GlobalAlloc`.
#[derive(Clone, Copy)]
pub struct Peer<A: GlobalAlloc + Sync + 'static> {
    /// The allocator.
    pub alloc: &'static A,
    /// Its name in tables.
    pub name: &'static str,
    /// How it hands idle memory back on request.
    pub release: fn(),
}

/// A peer's buffer: freed when dropped.
pub struct PeerBuf<A: GlobalAlloc + Sync + 'static> {
    alloc: &'static A,
    ptr: NonNull<u8>,
    layout: Layout,
}

impl<A: GlobalAlloc + Sync + 'static> PeerBuf<A> {
    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl<A: GlobalAlloc + Sync + 'static> Drop for PeerBuf<A> {
    fn drop(&mut self) {
        // SAFETY: the block came from this allocator with this layout.
        unsafe { self.alloc.dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl<A: GlobalAlloc + Sync + 'static> Backend for Peer<A> {
    type Buf = PeerBuf<A>;
    type Out = PeerBuf<A>;
    fn name(&self) -> &'static str {
        self.name
    }
    fn alloc(&self, size: usize, _output: bool) -> Option<PeerBuf<A>> {
        let layout = Layout::from_size_align(size.max(1), 64).ok()?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { self.alloc.alloc(layout) };
        Some(PeerBuf {
            alloc: self.alloc,
            ptr: NonNull::new(p)?,
            layout,
        })
    }
    fn ptr(buf: &mut PeerBuf<A>) -> *mut u8 {
        buf.ptr.as_ptr()
    }
    fn free(&self, buf: PeerBuf<A>) {
        drop(buf)
    }
    fn export(&self, buf: PeerBuf<A>) -> Option<PeerBuf<A>> {
        Some(buf)
    }
    fn trim(&self) -> Option<usize> {
        (self.release)();
        None
    }
}

/// glibc: `malloc_trim(0)` gives the heap's free pages back.
pub fn release_glibc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// mimalloc: a forced collection frees its caches and purges.
pub fn release_mimalloc() {
    #[cfg(feature = "peers")]
    // SAFETY: mi_collect has no preconditions.
    unsafe {
        libmimalloc_sys::mi_collect(true)
    };
}

/// jemalloc: purge every arena's dirty pages.
pub fn release_jemalloc() {
    #[cfg(feature = "peers")]
    {
        let name = c"arena.4096.purge";
        // SAFETY: a void mallctl with null old/new pointers; 4096 is
        // MALLCTL_ARENAS_ALL.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            );
        }
    }
}
