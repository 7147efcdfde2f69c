//! Every tunable of an arena, with its default and what it costs.

/// How an arena behaves. Every field says what it costs and when to change it.
///
/// ```
/// use warmarena::{ArenaConfig, ExecutionArena};
/// let cfg = ArenaConfig::default().retention_cap(256 << 20).huge_pages(false);
/// let arena = ExecutionArena::with_config(cfg);
/// assert_eq!(arena.stats().retention_cap, 256 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaConfig {
    /// Most bytes of free buffers kept with their pages (default: unbounded).
    /// Lower it when the process must give memory back between bursts; every
    /// byte evicted costs a system call and fresh faults when needed again.
    /// A cap of 0 keeps nothing: every free releases its pages.
    pub retention_cap: usize,
    /// Map classes of 2 MiB and more 2 MiB-aligned with transparent-huge-page
    /// advice (default: on), so a cold run takes about one fault per 2 MiB
    /// instead of one per 4 KiB. Turn it off where THP compaction stalls hurt
    /// more than faults, or to measure base-page behaviour.
    pub huge_pages: bool,
    /// Materialize the pages of every new mapping at once (default: off), so
    /// even the first write takes no fault; costs one extra system call per
    /// new mapping and commits memory that may never be written.
    pub prefault: bool,
    /// Pattern mode (default: off; execution arenas only): the arena
    /// records one thread's run of allocations between two boundaries
    /// (`ExecutionArena::begin_run`, `RunContext::clear`, entering a
    /// global scope), plans it into one block, and serves the next runs
    /// that repeat it from that block. Costs one predictable branch per
    /// allocate and free, the recording of each learning run, and the
    /// planned block (retained like any buffer). See `docs/pattern.md`.
    pub pattern: bool,
    /// Per-thread caches for the small classes (default: on): each thread
    /// keeps bounded bins of buffers below 64 KiB per arena, so the common
    /// small allocate and free take no lock (`docs/threads.md`). Off, every
    /// operation takes the arena's lock (what a retention cap below 64 MiB
    /// also does, so that the cap bounds every retained byte).
    pub thread_cache: bool,
    /// Learned placement for the execution heap (default: on; execution
    /// arenas without pattern mode): when every heap buffer (64 KiB and
    /// up) has been freed, the heap plans the sequence it just served, if
    /// it took new memory, with the static planner (lifetimes known now),
    /// releases the pages above the plan, and places the next sequence
    /// that repeats it at the planned offsets. Any difference falls back
    /// to best fit. Costs a few stores per heap request and, once per new
    /// sequence, the planner's time under the arena's lock. Off by default
    /// only under Miri. See `docs/warm-fidelity.md`.
    pub learn_placement: bool,
    /// Serve the small classes (below 64 KiB) from per-thread heaps that
    /// own whole runs (default: off, until it matches the thread caches on
    /// pools whose tasks move between workers): a local free goes back to
    /// its run's free list, a free on another thread is one
    /// compare-exchange onto the run's remote list, and empty runs go back
    /// to the arena. Off, the thread caches serve them (`thread_cache`).
    /// Ignored with pattern mode. See `docs/threads.md`.
    pub run_ownership: bool,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        ArenaConfig {
            retention_cap: usize::MAX,
            huge_pages: true,
            prefault: false,
            pattern: false,
            thread_cache: true,
            // Under Miri (every step interpreted) the planner at each
            // epoch's end made the heap tests too slow to run; the tests
            // of learned placement turn it on themselves.
            learn_placement: !cfg!(miri),
            run_ownership: false,
        }
    }
}

impl ArenaConfig {
    /// Sets [`ArenaConfig::run_ownership`].
    ///
    /// ```
    /// use warmarena::{ArenaConfig, ExecutionArena};
    /// let arena = ExecutionArena::with_config(ArenaConfig::default().run_ownership(true));
    /// let a = arena.allocate(100, 8).unwrap();
    /// drop(a);
    /// assert_eq!(arena.stats().live_bytes, 0);
    /// ```
    pub fn run_ownership(mut self, on: bool) -> Self {
        self.run_ownership = on;
        self
    }

    /// Sets [`ArenaConfig::retention_cap`].
    ///
    /// ```
    /// let c = warmarena::ArenaConfig::default().retention_cap(0);
    /// assert_eq!(c.retention_cap, 0);
    /// ```
    pub fn retention_cap(mut self, bytes: usize) -> Self {
        self.retention_cap = bytes;
        self
    }

    /// Sets [`ArenaConfig::huge_pages`].
    ///
    /// ```
    /// assert!(!warmarena::ArenaConfig::default().huge_pages(false).huge_pages);
    /// ```
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.huge_pages = on;
        self
    }

    /// Sets [`ArenaConfig::prefault`].
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().prefault(true).prefault);
    /// ```
    pub fn prefault(mut self, on: bool) -> Self {
        self.prefault = on;
        self
    }

    /// Sets [`ArenaConfig::pattern`].
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().pattern(true).pattern);
    /// ```
    pub fn pattern(mut self, on: bool) -> Self {
        self.pattern = on;
        self
    }

    /// Sets [`ArenaConfig::thread_cache`].
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().thread_cache);
    /// assert!(!warmarena::ArenaConfig::default().thread_cache(false).thread_cache);
    /// ```
    pub fn thread_cache(mut self, on: bool) -> Self {
        self.thread_cache = on;
        self
    }

    /// Sets [`ArenaConfig::learn_placement`].
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().learn_placement);
    /// let c = warmarena::ArenaConfig::default().learn_placement(false);
    /// assert!(!c.learn_placement);
    /// ```
    pub fn learn_placement(mut self, on: bool) -> Self {
        self.learn_placement = on;
        self
    }
}
