//! Shared helpers: a per-thread counting global allocator and a combined
//! "what did this run cost" probe (heap allocations, page faults, system calls).

use warmarena::faults::{pre_touch_stack, FaultCounter, FaultSource};

/// The suite's global allocator counts this thread's heap allocation calls.
pub use warmarena::global::CountingSystem as CountingAlloc;

/// Heap allocation calls (alloc, alloc_zeroed, realloc) made by this thread so far.
pub fn heap_calls() -> u64 {
    CountingAlloc::calls()
}

/// Costs observed over a stretch of this thread's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub heap_calls: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
}

/// Maps every page of the process's code, once (`faults::pre_touch_code`):
/// the first execution of code whose page is not mapped yet (the measured
/// closure itself, say) takes a minor fault that is the harness's, not the
/// arena's.
fn pre_map_code() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        warmarena::faults::pre_touch_code();
    });
}

/// Measures heap calls and page faults of the calling thread around `f`.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Cost, FaultSource) {
    let mut faults = FaultCounter::new();
    pre_map_code();
    let heap0 = heap_calls();
    pre_touch_stack();
    faults.reset();
    let r = f();
    let fl = faults.read();
    let heap = heap_calls() - heap0;
    (
        r,
        Cost {
            heap_calls: heap,
            minor_faults: fl.minor,
            major_faults: fl.major,
        },
        faults.source(),
    )
}

/// Writes `len` bytes of a pattern derived from `seed`, one store per 8 bytes.
pub fn fill(buf: &mut [u8], seed: u64) {
    let mut chunks = buf.chunks_exact_mut(8);
    let mut x = seed | 1;
    for c in &mut chunks {
        c.copy_from_slice(&x.to_le_bytes());
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    for b in chunks.into_remainder() {
        *b = seed as u8;
    }
}

/// Checks a pattern written by [`fill`].
pub fn check(buf: &[u8], seed: u64) -> bool {
    let mut chunks = buf.chunks_exact(8);
    let mut x = seed | 1;
    for c in &mut chunks {
        if c != x.to_le_bytes() {
            return false;
        }
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    chunks.remainder().iter().all(|&b| b == seed as u8)
}

/// Whether page-fault counts measure the code under test. Under valgrind
/// (`scripts/valgrind.sh` sets `WARMARENA_UNDER_VALGRIND=1`) they do not:
/// valgrind's JIT touches fresh memory on the test's own thread. Tests skip
/// their fault assertions then, and say so.
pub fn faults_trusted(test: &str) -> bool {
    if std::env::var_os("WARMARENA_UNDER_VALGRIND").is_some() {
        eprintln!(
            "{test}: fault counts not asserted under valgrind (its JIT faults on this thread)"
        );
        return false;
    }
    true
}

/// Measures `runs` (warm runs through session `s`) and asserts the warm-run
/// promise on both of its arenas: no page fault (where fault counts can be
/// trusted), no heap allocation, no system call, no payload copy, no cold
/// allocation, and nothing left live. Returns the execution arena's peak
/// over the runs (its peak is reset first) for the caller to check.
pub fn assert_warm_runs_cost_nothing(
    s: &warmarena::session::Session,
    what: &str,
    runs: impl FnOnce(),
) -> usize {
    let (e0, i0) = (s.execution_arena().stats(), s.io_arena().stats());
    s.execution_arena().reset_peak();
    let ((), cost, source) = measure(runs);
    let (e1, i1) = (s.execution_arena().stats(), s.io_arena().stats());
    println!("{what}: {cost:?} via {source:?}");
    if faults_trusted(what) {
        assert_eq!(cost.minor_faults, 0, "{what}: page faults");
    }
    assert_eq!(cost.heap_calls, 0, "{what}: heap allocations");
    assert_eq!(
        e1.os.syscalls() + i1.os.syscalls(),
        e0.os.syscalls() + i0.os.syscalls(),
        "{what}: system calls"
    );
    assert_eq!(e1.copies + i1.copies, 0, "{what}: payload copies");
    assert_eq!(
        (e1.cold_allocations, i1.cold_allocations),
        (e0.cold_allocations, i0.cold_allocations),
        "{what}: cold allocations"
    );
    assert_eq!(e1.live_bytes, 0, "{what}: live bytes after the runs");
    e1.peak_live_bytes
}

/// Ten runs of the example network through `ctx` (any `RunMemory`),
/// each after `clear`, outputs dropped: the warm loop the network tests
/// measure.
pub fn ten_net_runs<'i, C: warmarena::session::RunMemory<'i>>(
    net: &warmarena_net::Net,
    ctx: &mut C,
    image: &'i [f32],
    clear: fn(&mut C),
) {
    for _ in 0..10 {
        clear(ctx);
        let out = net.run(ctx, image).unwrap();
        std::hint::black_box(&out);
    }
}

/// An arena's state as its stats show it: every figure but the count of
/// lock acquisitions, which the operations (and reading the stats) move
/// whether or not they change anything.
pub fn state(s: warmarena::ArenaStats) -> warmarena::ArenaStats {
    let mut s = s;
    s.locked_operations = 0;
    s
}
