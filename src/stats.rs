//! Plain accounting structs that every layer reports into. No logic here
//! beyond arithmetic: what the numbers mean is defined where they are counted.

use crate::os::OsStats;

/// A snapshot of one arena's accounting.
///
/// Capacity is the unit: a live buffer counts its class capacity, not the
/// bytes asked for, because that is what the arena holds for it. Retained
/// (free, pages kept) capacity is never counted as live.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let a = arena.allocate(10_000, 64).unwrap();
/// let s = arena.stats();
/// assert_eq!(s.live_bytes, a.capacity());
/// drop(a);
/// let s = arena.stats();
/// assert_eq!((s.live_bytes, s.retained_bytes), (0, 10240));
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArenaStats {
    /// Capacity of buffers currently owned by someone (values, bindings, leases).
    pub live_bytes: usize,
    /// Number of live buffers.
    pub live_buffers: usize,
    /// Capacity of free buffers kept with their pages, ready for reuse.
    pub retained_bytes: usize,
    /// Number of retained buffers.
    pub retained_buffers: usize,
    /// The highest `live_bytes` seen since creation or the last `reset_peak`.
    /// Exact while one thread uses the arena; with several, buffers on
    /// their way through the threads' caches and the arena's stash of
    /// large buffers may be counted live at a peak or not, so it may be off
    /// by up to what those hold (docs/threads.md).
    pub peak_live_bytes: usize,
    /// Allocations served from a retained buffer (no system call, no fault).
    pub warm_allocations: u64,
    /// Allocations served from fresh or released pages.
    pub cold_allocations: u64,
    /// Allocations above the largest class, each with its own mapping that is
    /// released on free (also counted in `cold_allocations`).
    pub dedicated_allocations: u64,
    /// Buffers returned by their owners.
    pub frees: u64,
    /// Buffers released because the retention cap was exceeded.
    pub evictions: u64,
    /// Capacity released by cap evictions.
    pub evicted_bytes: usize,
    /// Calls to `trim`.
    pub trims: u64,
    /// Capacity released by `trim`.
    pub trimmed_bytes: usize,
    /// The retention cap in force (`usize::MAX` when unbounded).
    pub retention_cap: usize,
    /// Capacity of live buffers currently pinned by leases (I/O arena).
    pub leased_bytes: usize,
    /// Live leased buffers (each counted once however many clones it has).
    pub leases: usize,
    /// Payload copies the crate made for this arena's buffers (a grow that
    /// had to move, a staged input).
    pub copies: u64,
    /// Bytes moved by those copies.
    pub copied_bytes: usize,
    /// Address space currently mapped by the arena (live, retained, and the
    /// untouched tails of small-class runs).
    pub mapped_bytes: usize,
    /// Pattern mode: runs that matched their learned pattern to the end
    /// (every planned request served from the planned block).
    pub pattern_hits: u64,
    /// Pattern mode: runs that had a pattern but deviated from it, ended
    /// early, or found its block still in use (served from the classes).
    pub pattern_misses: u64,
    /// Pattern mode: patterns learned again after consecutive deviating runs.
    pub pattern_relearns: u64,
    /// Pattern mode: runs recorded and planned.
    pub pattern_learned: u64,
    /// Pattern mode: learning runs refused (more events than a run may
    /// record, or a request of the run failed); such runs are not planned.
    pub pattern_refusals: u64,
    /// Pattern mode: requests served at a planned offset.
    pub pattern_planned_allocations: u64,
    /// Pattern mode: bytes of the planned blocks of the cached patterns
    /// (each is an arena buffer, counted live while a run holds it and
    /// retained otherwise).
    pub pattern_block_bytes: usize,
    /// Times a thread took the arena's shared lock, for any reason: a
    /// locked allocation or free (large classes, the execution heap, a
    /// thread cache's miss), a thread cache's refill or flush, `stats`,
    /// `trim`, a lease. Allocations and frees served by a thread's cache or
    /// by pattern mode's cursor take none, so on a warm small-object or
    /// planned workload this stays still while `frees` climbs; the share
    /// of operations that take the lock is what bounds how many cores can
    /// use one arena at once. The `stats` call that reads it counts itself.
    pub locked_operations: u64,
    /// Times the execution heap (which serves one thread's buffers of 64
    /// KiB and up at a time, at first the arena's maker's) moved to another
    /// thread: at a run boundary crossed by that thread
    /// ([`ExecutionArena::begin_run`](crate::ExecutionArena::begin_run),
    /// a session's [`ArenaRun`](crate::session::ArenaRun)), or to the next thread that asked after its
    /// thread exited; each time only while no heap buffer was live. A
    /// runtime whose runs move between worker threads sees it climb by one
    /// a move.
    pub heap_moves: u64,
    /// Learned placement (`ArenaConfig::learn_placement`): sequences of
    /// execution-heap requests the arena planned and keeps.
    pub heap_plans: usize,
    /// Learned placement: execution-heap requests placed at a plan's
    /// offset. On a model whose runs repeat, it climbs by the run's heap
    /// requests every run after the first.
    pub heap_planned_allocations: u64,
    /// Learned placement: bytes released above the plans (pages best fit
    /// materialized that the plans do not need).
    pub heap_plan_released_bytes: usize,
    /// The arena's own system calls.
    pub os: OsStats,
}
