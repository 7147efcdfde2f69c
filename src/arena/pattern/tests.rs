//! Pure tests of pattern mode against a simulated arena: fake addresses,
//! no OS. Every step checks that no two live buffers share a byte.

use super::packing::{pack, UNPLANNED};
use super::recorder::Event;
use super::*;
use proptest::prelude::*;

const BLOCK_AREA: usize = 1 << 40;

/// The thread of the runs (0 is no thread's token).
const MAIN: usize = 1;

/// Another thread.
const OTHER: usize = 2;

/// A stand-in arena: ordinary buffers from a bump pointer far below the
/// pattern blocks; blocks granted at distinct high bases.
#[derive(Default)]
struct Sim {
    set: PatternSet,
    fast: Fast,
    /// Events the lock-free path served.
    fast_hits: usize,
    /// Heights of the blocks granted, in order.
    requests: Vec<usize>,
    next_block: u32,
    next_addr: usize,
    blocks_granted: usize,
    blocks_returned: usize,
    /// (address, capacity, arena block or None for planned)
    live: Vec<(usize, usize, Option<u32>)>,
}

impl Sim {
    fn new() -> Self {
        Sim {
            next_addr: 4096,
            set: PatternSet::new(MAX_EVENTS),
            ..Sim::default()
        }
    }

    fn boundary(&mut self, key: Option<u64>) {
        self.boundary_on(MAIN, key);
    }

    /// A boundary crossed by `thread`, as the seam does it.
    fn boundary_on(&mut self, thread: usize, key: Option<u64>) {
        self.detach_own(thread);
        let (r, learned) = self.set.end_run_deferred(&self.fast);
        self.blocks_returned += r.is_some() as usize;
        if let Some(l) = learned {
            // Planned outside the lock in the arena: nothing else happens
            // in between here (see `planning_outside_the_lock_...`).
            self.set.insert(plan(l));
        }
        self.set.start_run(thread, key);
        self.set.claim(thread, &self.fast);
    }

    /// The last handle goes (on `thread`), as the seam does it.
    fn end_on(&mut self, thread: usize) {
        self.detach_own(thread);
        let r = self.set.end_run(&self.fast);
        self.blocks_returned += r.is_some() as usize;
        if self.set.fast_live(&self.fast) == Some(0) {
            let r = self.set.detach(&self.fast);
            self.blocks_returned += r.is_some() as usize;
        }
    }

    fn detach_own(&mut self, thread: usize) {
        if self.fast.owner() == thread {
            let r = self.set.detach(&self.fast);
            self.blocks_returned += r.is_some() as usize;
        }
    }

    /// Requests served at a planned offset, both paths.
    fn planned(&self) -> u64 {
        self.set.planned_allocations(&self.fast)
    }

    fn alloc_on(&mut self, thread: usize, size: usize, align: usize) -> usize {
        if let Some((addr, cap)) = self.fast.try_alloc(thread, size, align) {
            self.fast_hits += 1;
            return self.push_planned(addr, cap, size, align);
        }
        self.detach_own(thread);
        let granted = &mut self.blocks_granted;
        let nb = &mut self.next_block;
        let requests = &mut self.requests;
        let a = self.set.on_allocate(thread, size, align, |h, al, _| {
            requests.push(h);
            *granted += 1;
            *nb += 1;
            let base = BLOCK_AREA + (*granted << 32);
            assert_eq!(base % al, 0);
            assert!(h > 0);
            Some(BlockRef { index: *nb, base })
        });
        let i = match a {
            Action::Planned { addr, cap } => self.push_planned(addr, cap, size, align),
            Action::Ordinary { record } => {
                let cap = (size + 15) & !15;
                let addr = (self.next_addr + align - 1) & !(align - 1);
                self.next_addr = addr + cap;
                self.next_block += 1;
                if let Some(k) = record {
                    self.set.granted(k, self.next_block, cap);
                }
                self.live.push((addr, cap, Some(self.next_block)));
                self.check_disjoint();
                self.live.len() - 1
            }
        };
        self.set.claim(thread, &self.fast);
        i
    }

    fn push_planned(&mut self, addr: usize, cap: usize, size: usize, align: usize) -> usize {
        assert_eq!(addr % align, 0, "planned offset misaligned");
        assert!(cap >= size);
        self.live.push((addr, cap, None));
        self.check_disjoint();
        self.live.len() - 1
    }

    fn alloc(&mut self, size: usize, align: usize) -> usize {
        self.alloc_on(MAIN, size, align)
    }

    /// Frees the buffer at position `i` of `live`.
    fn free(&mut self, i: usize) {
        self.free_on(MAIN, i)
    }

    /// Frees the buffer at position `i` of `live` on `thread`.
    fn free_on(&mut self, thread: usize, i: usize) {
        let (addr, _, block) = self.live.swap_remove(i);
        if block.is_none() && self.fast.try_free(thread, addr) {
            self.fast_hits += 1;
            return;
        }
        self.detach_own(thread);
        match block {
            None => {
                let r = self
                    .set
                    .on_free_planned(addr)
                    .expect("planned buffer not found");
                self.blocks_returned += r.is_some() as usize;
            }
            Some(b) => {
                assert!(!self.set.owns(addr));
                self.set.on_free_block(b);
            }
        }
        self.set.claim(thread, &self.fast);
    }

    fn free_addr(&mut self, addr: usize) {
        let i = self.live.iter().position(|l| l.0 == addr).unwrap();
        self.free(i);
    }

    fn check_disjoint(&self) {
        let mut v: Vec<(usize, usize)> = self.live.iter().map(|l| (l.0, l.1)).collect();
        v.sort_unstable();
        for w in v.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "live buffers overlap: {w:?}");
        }
    }

    fn planned_live(&self) -> usize {
        self.live.iter().filter(|l| l.2.is_none()).count()
    }
}

/// The run every test replays: a small chain with reuse, one buffer kept.
fn chain(sim: &mut Sim) -> Vec<usize> {
    let mut addrs = Vec::new();
    let a = sim.alloc(1000, 64);
    let b = sim.alloc(3000, 16);
    addrs.push(sim.live[a].0);
    addrs.push(sim.live[b].0);
    let a_addr = sim.live[a].0;
    sim.free_addr(a_addr);
    let c = sim.alloc(500, 256);
    addrs.push(sim.live[c].0);
    let b_addr = addrs[1];
    sim.free_addr(b_addr);
    let c_addr = addrs[2];
    sim.free_addr(c_addr);
    addrs
}

#[test]
fn second_run_is_served_planned_and_counts_a_hit() {
    let mut sim = Sim::new();
    sim.boundary(None);
    chain(&mut sim);
    assert!(sim.set.learning());
    sim.boundary(None);
    assert_eq!(sim.set.counters.learned, 1);
    let addrs = chain(&mut sim);
    assert!(
        addrs.iter().all(|&a| a >= BLOCK_AREA),
        "every request planned"
    );
    assert_eq!(sim.planned(), 3);
    sim.boundary(None);
    assert_eq!(sim.set.counters.hits, 1);
    assert_eq!((sim.blocks_granted, sim.blocks_returned), (1, 1));
    // A third run: the same offsets inside a (re)granted block.
    let again = chain(&mut sim);
    let base = |v: &[usize]| v.iter().map(|&a| a - v[0]).collect::<Vec<_>>();
    assert_eq!(base(&addrs), base(&again));
}

#[test]
fn a_buffer_never_freed_is_served_from_classes() {
    let mut sim = Sim::new();
    for run in 0..3 {
        sim.boundary(Some(7));
        let keep = sim.alloc(64, 8);
        let t = sim.alloc(128, 8);
        sim.free(t);
        let kept = sim.live[keep.min(sim.live.len() - 1)];
        assert!(
            kept.2.is_some(),
            "run {run}: a kept buffer is an arena block"
        );
    }
    sim.boundary(None);
    assert_eq!(sim.set.counters.hits, 2);
}

/// Each deviation kind: the run falls back, already planned buffers stay
/// disjoint from everything that follows, and the block goes back only
/// once its last planned buffer is freed.
#[test]
fn every_deviation_kind_falls_back() {
    type Deviate = fn(&mut Sim);
    let kinds: [(&str, Deviate); 5] = [
        ("another size", |s| {
            s.alloc(1000, 64);
            s.alloc(3001, 16);
        }),
        ("another alignment", |s| {
            s.alloc(1000, 64);
            s.alloc(3000, 32);
        }),
        ("an extra request", |s| {
            s.alloc(1000, 64);
            s.alloc(3000, 16);
            s.alloc(8, 8);
        }),
        ("a free in another order", |s| {
            s.alloc(1000, 64);
            s.alloc(3000, 16);
            s.free(1);
        }),
        ("a buffer live past its free", |s| {
            s.alloc(1000, 64);
            s.alloc(3000, 16);
            s.alloc(500, 256);
        }),
    ];
    for (name, deviate) in kinds {
        let mut sim = Sim::new();
        sim.boundary(None);
        chain(&mut sim);
        sim.boundary(None);
        deviate(&mut sim);
        // After the deviation every request comes from the classes.
        for _ in 0..4 {
            let i = sim.alloc(1000, 64);
            assert!(sim.live[i].2.is_some(), "{name}: planned after a deviation");
        }
        let planned_before = sim.planned_live();
        sim.boundary(None);
        assert_eq!(sim.set.counters.misses, 1, "{name}");
        if planned_before > 0 {
            assert_eq!(
                sim.blocks_returned, 0,
                "{name}: block given back while in use"
            );
            // The next run may not use the busy block.
            chain(&mut sim);
            assert!(sim.live.iter().all(|l| l.2.is_some() || l.0 >= BLOCK_AREA));
            assert_eq!(sim.set.counters.misses, 2, "{name}: busy block is a miss");
        }
        while let Some(i) = sim.live.iter().position(|l| l.2.is_none()) {
            sim.free(i);
        }
        assert_eq!(sim.blocks_returned, sim.blocks_granted, "{name}");
    }
}

#[test]
fn alternating_keys_are_both_served_planned() {
    let mut sim = Sim::new();
    let shapes = [(1 << 20, 4096), (3 << 20, 8192)];
    for run in 0..10 {
        let (a, b) = shapes[run % 2];
        sim.boundary(Some(run as u64 % 2));
        let x = sim.alloc(a, 64);
        let y = sim.alloc(b, 64);
        sim.free(y);
        sim.free(x.min(sim.live.len() - 1));
    }
    sim.boundary(None);
    assert_eq!(sim.set.counters.learned, 2);
    assert_eq!(sim.set.counters.hits, 8);
    assert_eq!(sim.set.counters.misses, 0);
}

#[test]
fn first_request_selects_among_unkeyed_patterns() {
    let mut sim = Sim::new();
    for run in 0..6 {
        sim.boundary(None);
        let x = sim.alloc(100 + run % 2, 8);
        sim.free(x);
    }
    sim.boundary(None);
    assert_eq!((sim.set.counters.learned, sim.set.counters.hits), (2, 4));
}

#[test]
fn relearns_after_consecutive_deviations() {
    let mut sim = Sim::new();
    sim.boundary(Some(1));
    chain(&mut sim);
    for _ in 0..RELEARN_AFTER {
        sim.boundary(Some(1));
        let x = sim.alloc(1000, 64);
        let y = sim.alloc(77, 8); // deviates
        sim.free(y);
        sim.free(x);
    }
    sim.boundary(Some(1));
    assert_eq!(sim.set.counters.relearns, 1);
    assert!(sim.set.learning());
    let x = sim.alloc(1000, 64);
    let y = sim.alloc(77, 8);
    sim.free(y);
    sim.free(x);
    sim.boundary(Some(1));
    let x = sim.alloc(1000, 64);
    let y = sim.alloc(77, 8);
    assert!(sim.live[x].0 >= BLOCK_AREA && sim.live[y].0 >= BLOCK_AREA);
    sim.free(1);
    sim.free(0);
    sim.boundary(None);
    assert_eq!(
        sim.set.len(),
        1,
        "the relearned pattern replaced the old one"
    );
    assert_eq!(sim.set.counters.hits, 1);
}

#[test]
fn other_threads_are_served_ordinarily_and_not_recorded() {
    let mut sim = Sim::new();
    for _ in 0..3 {
        sim.boundary(Some(3));
        let x = sim.alloc(4096, 64);
        let o = sim.alloc_on(9, 4096, 64);
        assert!(sim.live[o].2.is_some());
        sim.free(o);
        sim.free(x.min(sim.live.len() - 1));
    }
    sim.boundary(None);
    assert_eq!(sim.set.counters.hits, 2);
}

#[test]
fn cache_keeps_the_most_recent_patterns() {
    let mut sim = Sim::new();
    for key in 0..(CACHE_LEN as u64 + 2) {
        sim.boundary(Some(key));
        let x = sim.alloc(64, 8);
        sim.free(x);
    }
    sim.boundary(None);
    assert_eq!(sim.set.len(), CACHE_LEN);
    assert_eq!(sim.set.block_bytes(), 64, "one block size for every key");
}

#[test]
fn a_run_past_the_event_limit_is_refused() {
    let mut sim = Sim::new();
    sim.set = PatternSet::new(10);
    sim.boundary(None);
    for _ in 0..20 {
        let x = sim.alloc(64, 8);
        sim.free(x);
    }
    sim.boundary(None);
    assert_eq!((sim.set.counters.refusals, sim.set.len()), (1, 0));
}

#[test]
fn cap_at_finds_the_live_buffer_at_a_reused_offset() {
    let mut sim = Sim::new();
    let run = |sim: &mut Sim| {
        let a = sim.alloc(100, 16);
        sim.free(a);
        let b = sim.alloc(5000, 16);
        sim.free(b);
    };
    sim.boundary(None);
    run(&mut sim);
    sim.boundary(None);
    let a = sim.alloc(100, 16);
    assert_eq!(sim.set.cap_at(sim.live[a].0, &sim.fast), Some(112));
    sim.free(a);
    let b = sim.alloc(5000, 16);
    assert_eq!(sim.set.cap_at(sim.live[b].0, &sim.fast), Some(5008));
    assert_eq!(sim.set.cap_at(sim.live[b].0 + 16, &sim.fast), None);
}

#[test]
fn packing_respects_alignment_and_reaches_the_peak_on_a_stack() {
    // A stack of frees in reverse order: the peak is the sum.
    let mut events = Vec::new();
    let caps: Vec<usize> = (0..50).map(|i| 64 * (1 + i % 7)).collect();
    let aligns: Vec<usize> = (0..50).map(|i| 16 << (i % 4)).collect();
    for k in 0..50 {
        events.push(Event::Alloc {
            size: caps[k],
            align: aligns[k],
        });
    }
    for k in (0..50u32).rev() {
        events.push(Event::Free { k });
    }
    let p = pack(&events, &caps, &aligns);
    let sum: usize = caps.iter().sum();
    assert_eq!(p.height, sum);
    for (&o, &a) in p.offsets.iter().zip(&aligns) {
        assert_ne!(o, UNPLANNED);
        assert_eq!(o % a, 0);
    }
}

/// One random run: allocations of random sizes and alignments and frees of
/// random live buffers.
fn random_run(seed: u64, n: usize) -> Vec<(bool, usize, usize, usize)> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            let r = next();
            (
                r % 3 != 0,
                1 + (r >> 8) as usize % 5000,
                1 << ((r >> 24) % 8),
                (r >> 32) as usize,
            )
        })
        .collect()
}

/// What another thread does in the middle of a replayed run.
#[derive(Debug, Clone, Copy)]
enum Foreign {
    /// Frees a live buffer (planned or not).
    Free,
    /// Crosses a boundary (ending the run).
    Boundary,
    /// Drops the last handle (ending the run).
    End,
}

fn replay_with(
    sim: &mut Sim,
    run: &[(bool, usize, usize, usize)],
    deviate_at: Option<usize>,
    foreign: Option<(usize, Foreign)>,
) {
    for (i, &(alloc, size, align, pick)) in run.iter().enumerate() {
        match foreign {
            Some((at, f)) if at == i => match f {
                Foreign::Free if !sim.live.is_empty() => {
                    let n = sim.live.len();
                    sim.free_on(OTHER, pick % n);
                }
                Foreign::Free => {}
                Foreign::Boundary => sim.boundary_on(OTHER, Some(99)),
                Foreign::End => sim.end_on(OTHER),
            },
            _ => {}
        }
        let dev = deviate_at == Some(i);
        if alloc || sim.live.is_empty() {
            sim.alloc(if dev { size + 1 } else { size }, align);
        } else {
            let n = sim.live.len();
            sim.free(if dev { (pick + 1) % n } else { pick % n });
        }
    }
}

proptest! {
    // No failure file under Miri: its isolation has no working directory.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 2 } else { 48 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random runs, replayed with a random deviation (or none) and random
    /// keys: no two live buffers ever overlap, and every block granted is
    /// given back once its buffers are freed.
    #[test]
    fn proptest_live_buffers_never_overlap(
        seeds in proptest::collection::vec(1u64..1_000_000, 1..3),
        len in 1usize..80,
        plan in proptest::collection::vec(
            (0usize..3, proptest::option::of(0usize..100), proptest::option::of((0usize..100, 0u8..3))),
            1..8,
        ),
    ) {
        let runs: Vec<_> = seeds.iter().map(|&s| random_run(s, len)).collect();
        let mut sim = Sim::new();
        for (which, deviate, foreign) in plan {
            let r = which % runs.len();
            sim.boundary(if which == 2 { None } else { Some(r as u64) });
            let foreign = foreign.map(|(at, f)| {
                (at % len, [Foreign::Free, Foreign::Boundary, Foreign::End][f as usize])
            });
            replay_with(&mut sim, &runs[r], deviate.map(|d| d % len), foreign);
        }
        sim.boundary(None);
        while !sim.live.is_empty() {
            sim.free(sim.live.len() - 1);
        }
        prop_assert_eq!(sim.blocks_returned, sim.blocks_granted);
    }
}

/// A run of `n` pairs of one size: the fast path serves every event but
/// the first planned allocation (which grants the block, then claims) and
/// the recording's last event (which ends the claim).
#[test]
fn the_fast_path_serves_a_matching_run_without_the_lock() {
    let mut sim = Sim::new();
    let n = 50;
    for run in 0..4 {
        sim.boundary(Some(1));
        for _ in 0..n {
            let i = sim.alloc(4096, 64);
            sim.free(i);
        }
        if run >= 1 {
            assert_eq!(sim.fast.owner(), 0, "a finished run owns nothing");
        }
    }
    sim.boundary(None);
    assert_eq!(sim.set.counters.hits, 3);
    assert_eq!(sim.planned(), 3 * n as u64);
    assert_eq!(sim.fast_hits, 3 * (2 * n - 2));
    assert_eq!(sim.blocks_granted, sim.blocks_returned);
}

/// Stats read mid-run count what the fast path handed out.
#[test]
fn planned_count_is_exact_while_the_fast_path_owns_the_run() {
    let mut sim = Sim::new();
    for _ in 0..2 {
        sim.boundary(Some(1));
        for _ in 0..10 {
            let i = sim.alloc(100, 16);
            sim.free(i);
        }
    }
    sim.boundary(Some(1));
    for k in 1..=6u64 {
        let i = sim.alloc(100, 16);
        assert_eq!(sim.planned(), 10 + k);
        assert_eq!(sim.set.fast_live(&sim.fast), Some(1));
        sim.free(i);
        assert_eq!(sim.set.fast_live(&sim.fast), Some(0));
    }
    assert_ne!(sim.fast.owner(), 0);
}

fn learned_pairs(sim: &mut Sim, n: usize) {
    for _ in 0..2 {
        sim.boundary(Some(1));
        for _ in 0..n {
            let i = sim.alloc(256, 16);
            sim.free(i);
        }
    }
    sim.boundary(Some(1));
}

/// A boundary on another thread ends the owner's run: the owner's next
/// operation takes the lock, the run counts as a miss, and the block goes
/// back once its buffers are freed.
#[test]
fn a_boundary_on_another_thread_stops_the_owner() {
    let mut sim = Sim::new();
    learned_pairs(&mut sim, 8);
    let a = sim.alloc(256, 16);
    sim.free(a);
    let b = sim.alloc(256, 16);
    assert!(sim.live[b].2.is_none());
    assert_eq!(sim.fast.owner(), MAIN);
    sim.boundary_on(OTHER, Some(5));
    assert_eq!(sim.set.counters.misses, 0, "finished by its owner");
    let fast_before = sim.fast_hits;
    sim.free(b);
    assert_eq!(sim.fast_hits, fast_before, "a stopped owner takes the lock");
    assert_eq!((sim.fast.owner(), sim.set.counters.misses), (0, 1));
    let c = sim.alloc(256, 16);
    assert!(
        sim.live[c].2.is_some(),
        "the ended run is served from classes"
    );
    while !sim.live.is_empty() {
        sim.free(0);
    }
    sim.boundary(None);
    assert_eq!(sim.blocks_granted, sim.blocks_returned);
}

/// A planned buffer freed by another thread: counted apart, the owner's
/// run deviates where it expected that free, and the block still goes back.
#[test]
fn a_free_on_another_thread_makes_the_run_deviate() {
    let mut sim = Sim::new();
    learned_pairs(&mut sim, 8);
    let a = sim.alloc(256, 16);
    sim.free_on(OTHER, a);
    assert_eq!(sim.set.fast_live(&sim.fast), Some(0));
    assert_eq!(sim.fast.owner(), MAIN);
    let b = sim.alloc(256, 16);
    assert!(
        sim.live[b].2.is_some(),
        "deviated: the free was not the owner's"
    );
    sim.free(b);
    sim.boundary(None);
    assert_eq!(sim.set.counters.misses, 1);
    assert_eq!(sim.blocks_granted, sim.blocks_returned);
}

/// The last handle goes on another thread: an owner holding no planned
/// buffer is detached at once; one holding some detaches at its free.
#[test]
fn the_last_handle_on_another_thread_takes_back_the_cursor() {
    for holding in [false, true] {
        let mut sim = Sim::new();
        learned_pairs(&mut sim, 8);
        let a = sim.alloc(256, 16);
        if !holding {
            sim.free(a);
        }
        sim.end_on(OTHER);
        assert_eq!(sim.fast.owner() == 0, !holding, "holding {holding}");
        if holding {
            sim.free(a);
            assert_eq!(sim.fast.owner(), 0);
        }
        assert_eq!(sim.set.counters.misses, 1);
        assert_eq!(sim.blocks_granted, sim.blocks_returned, "holding {holding}");
    }
}

/// Planning happens outside the lock: another thread's run may start (and
/// be served from a cached pattern) between the end of a learning run and
/// the insertion of its plan, which may evict patterns; the served run
/// keeps its pattern.
#[test]
fn planning_outside_the_lock_keeps_a_served_run_intact() {
    let mut sim = Sim::new();
    // Fill the cache: keys 0..CACHE_LEN, each learned once, key 0 used last.
    for k in (0..CACHE_LEN as u64).rev() {
        sim.boundary(Some(k));
        let i = sim.alloc(64 * (k as usize + 1), 16);
        sim.free(i);
    }
    sim.boundary(Some(0));
    let i = sim.alloc(64, 16);
    sim.free(i);
    // A learning run for a new key ends; before its plan is inserted,
    // another thread starts a run of key 0 and takes a planned buffer.
    sim.boundary(Some(50));
    let i = sim.alloc(4096, 16);
    sim.free(i);
    sim.detach_own(MAIN);
    let (r, learned) = sim.set.end_run_deferred(&sim.fast);
    assert!(r.is_none());
    let learned = learned.expect("a learning run");
    sim.set.start_run(OTHER, Some(0));
    let a = sim.alloc_on(OTHER, 64, 16);
    assert!(sim.live[a].2.is_none(), "served planned");
    sim.set.insert(plan(learned));
    assert_eq!(sim.set.len(), CACHE_LEN);
    assert_eq!(sim.set.counters.learned, CACHE_LEN as u64 + 1);
    sim.free_on(OTHER, a);
    sim.boundary(None);
    assert_eq!(sim.set.counters.hits, 2, "key 0 served twice to the end");
    assert_eq!(sim.blocks_granted, sim.blocks_returned);
}

/// Alternating keys of different heights take turns with one block size
/// (the larger), once both have been served; a key learned once and never
/// served (a one-off run) does not make the block larger.
#[test]
fn alternating_keys_share_one_block_size() {
    let mut sim = Sim::new();
    let run = |sim: &mut Sim, size: usize| {
        let a = sim.alloc(size, 16);
        let b = sim.alloc(size, 16);
        sim.free(b);
        sim.free(a);
    };
    sim.boundary(Some(9));
    run(&mut sim, 1 << 20);
    for r in 0..8u64 {
        sim.boundary(Some(r % 2));
        run(&mut sim, if r % 2 == 0 { 1000 } else { 3000 });
    }
    sim.boundary(None);
    assert_eq!(sim.set.counters.hits, 6);
    assert_eq!(
        sim.requests[0],
        2 * 1008,
        "the first block: its own pattern's"
    );
    assert!(
        sim.requests[1..].iter().all(|&h| h == 2 * 3008),
        "then the larger of the two, never the one-off's: {:?}",
        sim.requests
    );
    assert_eq!(sim.set.block_bytes(), 2 * 3008);
}

/// A thread whose locals are gone (token `NO_THREAD`) is never served by
/// the fast path, whether a cursor is owned or not, and never claims one.
#[test]
fn a_thread_without_a_token_never_takes_the_fast_path() {
    let mut sim = Sim::new();
    assert_eq!(sim.fast.try_alloc(fast::NO_THREAD, 64, 16), None);
    assert!(!sim.fast.try_free(fast::NO_THREAD, 4096));
    for _ in 0..2 {
        sim.boundary_on(fast::NO_THREAD, Some(7));
        for _ in 0..4 {
            let i = sim.alloc_on(fast::NO_THREAD, 64, 16);
            sim.free_on(fast::NO_THREAD, i);
        }
        assert_eq!(sim.fast.owner(), 0);
    }
    assert_eq!(sim.fast_hits, 0);
    learned_pairs(&mut sim, 4);
    let i = sim.alloc(256, 16);
    assert_eq!(sim.fast.owner(), MAIN);
    assert_eq!(sim.fast.try_alloc(fast::NO_THREAD, 256, 16), None);
    sim.free(i);
}
