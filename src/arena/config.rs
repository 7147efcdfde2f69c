//! Every tunable of an arena, with its default and what it costs.

/// How an arena behaves. Each setting says what it costs and when to change it.
///
/// The fields are private: start from [`ArenaConfig::default`] and change
/// settings with the builder methods, each named for its setting and
/// returning the changed config (`retention_cap(bytes)`, `huge_pages(on)`,
/// ...). Each setting is read back with a getter named `get_` and the
/// setting (`get_retention_cap()`, `get_huge_pages()`, ...), as
/// `std::process::Command` pairs `arg` with `get_args`. New settings can be
/// added without breaking callers.
///
/// One coupling: a retention cap below 64 MiB turns the per-thread caches
/// off, whatever [`thread_cache`](ArenaConfig::thread_cache) says, so that
/// the cap bounds every retained byte (a thread's cache would hold bytes
/// the cap cannot see). Pattern mode turns them off too.
///
/// ```
/// use warmarena::{ArenaConfig, ExecutionArena};
/// let cfg = ArenaConfig::default().retention_cap(256 << 20).huge_pages(false);
/// assert_eq!(cfg.get_retention_cap(), 256 << 20);
/// let arena = ExecutionArena::with_config(cfg);
/// assert_eq!(arena.stats().retention_cap, 256 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArenaConfig {
    /// Most bytes of free buffers kept with their pages (default: unbounded).
    /// Lower it when the process must give memory back between bursts; every
    /// byte evicted costs a system call and fresh faults when needed again.
    /// A cap of 0 keeps nothing: every free releases its pages.
    pub(crate) retention_cap: usize,
    /// Map classes of 2 MiB and more 2 MiB-aligned with transparent-huge-page
    /// advice (default: on), so a cold run takes about one fault per 2 MiB
    /// instead of one per 4 KiB. Turn it off where THP compaction stalls hurt
    /// more than faults, or to measure base-page behaviour.
    pub(crate) huge_pages: bool,
    /// Materialize the pages of every new mapping at once (default: off), so
    /// even the first write takes no fault; costs one extra system call per
    /// new mapping and commits memory that may never be written.
    pub(crate) prefault: bool,
    /// Pattern mode (default: off; execution arenas only): the arena
    /// records one thread's run of allocations between two boundaries
    /// (`ExecutionArena::begin_run`, `ArenaRun::clear`, entering a
    /// global scope), plans it into one block, and serves the next runs
    /// that repeat it from that block. Costs one predictable branch per
    /// allocate and free, the recording of each learning run, and the
    /// planned block (retained like any buffer). See `docs/pattern.md`.
    pub(crate) pattern: bool,
    /// Per-thread keeping of free small memory (default: on): with run
    /// ownership, a heap keeps empty runs (a spare per class, and its
    /// current run for a while); without it, the thread caches' bins.
    /// Off, a heap gives back every run that empties at once (and without
    /// run ownership every operation takes the arena's lock). A retention
    /// cap below 64 MiB also turns it off (`docs/threads.md`).
    pub(crate) thread_cache: bool,
    /// Learned placement for the execution heap (default: on; execution
    /// arenas without pattern mode): when every heap buffer (64 KiB and
    /// up) has been freed, the heap plans the sequence it just served, if
    /// it took new memory, with the static planner (lifetimes known now),
    /// releases the pages above the plan, and places the next sequence
    /// that repeats it at the planned offsets. Any difference falls back
    /// to best fit. Costs a few stores per heap request and, once per new
    /// sequence, the planner's time under the arena's lock. Off by default
    /// only under Miri. See `docs/design/execution-heap.md`.
    pub(crate) learn_placement: bool,
    /// Serve the small classes (below 64 KiB) from per-thread heaps that
    /// own whole runs (default: on): a local free goes back to its run's
    /// free list, a free on another thread is one compare-exchange onto
    /// the run's remote list, and empty runs go back to the arena. Off,
    /// the thread caches serve them (`thread_cache`), kept to compare the
    /// two until they go. Ignored with pattern mode. See `docs/threads.md`.
    pub(crate) run_ownership: bool,
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
            run_ownership: true,
        }
    }
}

impl ArenaConfig {
    /// Serve the small classes (below 64 KiB) from per-thread heaps that
    /// own whole runs (default: on): a local free goes back to its run's
    /// free list, a free on another thread is one compare-exchange onto
    /// the run's remote list, and empty runs go back to the arena. Off,
    /// the thread caches serve them (`thread_cache`), kept to compare the
    /// two until they go. Ignored with pattern mode. See `docs/threads.md`.
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

    /// Sets the retention cap: the most bytes of free buffers kept with
    /// their pages (default: unbounded). Lower it when the process must give
    /// memory back between bursts; every byte evicted costs a system call
    /// and fresh faults when needed again. A cap of 0 keeps nothing: every
    /// free releases its pages.
    ///
    /// **A cap below 64 MiB turns the per-thread caches off**
    /// ([`thread_cache`](ArenaConfig::thread_cache)), so that the cap bounds
    /// every retained byte: small allocations and frees then take the
    /// arena's lock. `ExecutionArena::set_retention_cap` on a live arena
    /// does the same.
    ///
    /// ```
    /// let c = warmarena::ArenaConfig::default().retention_cap(0);
    /// assert_eq!(c.get_retention_cap(), 0);
    /// ```
    pub fn retention_cap(mut self, bytes: usize) -> Self {
        self.retention_cap = bytes;
        self
    }

    /// Map classes of 2 MiB and more 2 MiB-aligned with transparent-huge-page
    /// advice (default: on), so a cold run takes about one fault per 2 MiB
    /// instead of one per 4 KiB. Turn it off where THP compaction stalls hurt
    /// more than faults, or to measure base-page behaviour.
    ///
    /// ```
    /// assert!(!warmarena::ArenaConfig::default().huge_pages(false).get_huge_pages());
    /// ```
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.huge_pages = on;
        self
    }

    /// Materialize the pages of every new mapping at once (default: off), so
    /// even the first write takes no fault; costs one extra system call per
    /// new mapping and commits memory that may never be written.
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().prefault(true).get_prefault());
    /// ```
    pub fn prefault(mut self, on: bool) -> Self {
        self.prefault = on;
        self
    }

    /// Pattern mode (default: off; execution arenas only): the arena
    /// records one thread's run of allocations between two boundaries
    /// (`ExecutionArena::begin_run`, `ArenaRun::clear`, entering a
    /// global scope), plans it into one block, and serves the next runs
    /// that repeat it from that block. Costs one predictable branch per
    /// allocate and free, the recording of each learning run, and the
    /// planned block (retained like any buffer). See `docs/pattern.md`.
    /// Pattern mode turns the per-thread caches off.
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().pattern(true).get_pattern());
    /// ```
    pub fn pattern(mut self, on: bool) -> Self {
        self.pattern = on;
        self
    }

    /// Sets per-thread keeping of free small memory (default: on). With
    /// run ownership (the default small path) a thread's heap then keeps
    /// empty runs: one spare per class, and its current run for 16 slow
    /// paths, so a class whose runs empty and refill by turns takes no
    /// lock. Off, a heap gives back every run that empties at once. With
    /// `run_ownership(false)` this is the thread caches: bounded bins of
    /// buffers below 64 KiB per thread and arena; off, every operation
    /// takes the arena's lock.
    ///
    /// **On is a request, not a guarantee:** a retention cap below 64 MiB
    /// ([`retention_cap`](ArenaConfig::retention_cap), or
    /// `set_retention_cap` later) and pattern mode turn it off, so that
    /// the cap bounds every retained byte but the free slots of partly
    /// used runs. A cap raised to 64 MiB or more turns it back on.
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().get_thread_cache());
    /// assert!(!warmarena::ArenaConfig::default().thread_cache(false).get_thread_cache());
    /// ```
    pub fn thread_cache(mut self, on: bool) -> Self {
        self.thread_cache = on;
        self
    }

    /// Learned placement for the execution heap (default: on; execution
    /// arenas without pattern mode): when every heap buffer (64 KiB and
    /// up) has been freed, the heap plans the sequence it just served, if
    /// it took new memory, with the static planner (lifetimes known now),
    /// releases the pages above the plan, and places the next sequence
    /// that repeats it at the planned offsets. Any difference falls back
    /// to best fit. Costs a few stores per heap request and, once per new
    /// sequence, the planner's time under the arena's lock. Off by default
    /// only under Miri. See `docs/design/execution-heap.md`.
    ///
    /// ```
    /// assert!(warmarena::ArenaConfig::default().get_learn_placement());
    /// let c = warmarena::ArenaConfig::default().learn_placement(false);
    /// assert!(!c.get_learn_placement());
    /// ```
    pub fn learn_placement(mut self, on: bool) -> Self {
        self.learn_placement = on;
        self
    }

    /// The retention cap in bytes (`usize::MAX`: unbounded).
    pub fn get_retention_cap(&self) -> usize {
        self.retention_cap
    }

    /// Whether huge-page advice is on.
    pub fn get_huge_pages(&self) -> bool {
        self.huge_pages
    }

    /// Whether new mappings are prefaulted.
    pub fn get_prefault(&self) -> bool {
        self.prefault
    }

    /// Whether pattern mode is on.
    pub fn get_pattern(&self) -> bool {
        self.pattern
    }

    /// Whether the per-thread caches were asked for. They are in force only
    /// when, besides, the retention cap is 64 MiB or more and pattern mode
    /// is off (see [`thread_cache`](ArenaConfig::thread_cache)).
    pub fn get_thread_cache(&self) -> bool {
        self.thread_cache
    }

    /// Whether learned placement is on.
    pub fn get_learn_placement(&self) -> bool {
        self.learn_placement
    }

    /// Whether run ownership is on.
    pub fn get_run_ownership(&self) -> bool {
        self.run_ownership
    }
}
