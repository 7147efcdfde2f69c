//! Pure tests of pattern mode against a simulated arena: fake addresses,
//! no OS. Every step checks that no two live buffers share a byte.

use super::packing::{pack, UNPLANNED};
use super::recorder::Event;
use super::*;
use proptest::prelude::*;

const BLOCK_AREA: usize = 1 << 40;

/// A stand-in arena: ordinary buffers from a bump pointer far below the
/// pattern blocks; blocks granted at distinct high bases.
#[derive(Default)]
struct Sim {
    set: PatternSet,
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
        let r = self.set.begin_run(0, key);
        self.blocks_returned += r.is_some() as usize;
    }

    fn alloc_on(&mut self, thread: usize, size: usize, align: usize) -> usize {
        let granted = &mut self.blocks_granted;
        let nb = &mut self.next_block;
        let a = self.set.on_allocate(thread, size, align, |h, al| {
            *granted += 1;
            *nb += 1;
            let base = BLOCK_AREA + (*granted << 32);
            assert_eq!(base % al, 0);
            assert!(h > 0);
            Some(BlockRef { index: *nb, base })
        });
        let (addr, cap, block) = match a {
            Action::Planned { addr, cap } => {
                assert_eq!(addr % align, 0, "planned offset misaligned");
                assert!(cap >= size);
                (addr, cap, None)
            }
            Action::Ordinary { record } => {
                let cap = (size + 15) & !15;
                let addr = (self.next_addr + align - 1) & !(align - 1);
                self.next_addr = addr + cap;
                self.next_block += 1;
                if let Some(k) = record {
                    self.set.granted(k, self.next_block, cap);
                }
                (addr, cap, Some(self.next_block))
            }
        };
        self.live.push((addr, cap, block));
        self.check_disjoint();
        self.live.len() - 1
    }

    fn alloc(&mut self, size: usize, align: usize) -> usize {
        self.alloc_on(0, size, align)
    }

    /// Frees the buffer at position `i` of `live`.
    fn free(&mut self, i: usize) {
        let (addr, _, block) = self.live.swap_remove(i);
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
    assert_eq!(sim.set.counters.planned_allocations, 3);
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
    assert_eq!(sim.set.block_bytes(), CACHE_LEN * 64);
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
    assert_eq!(sim.set.cap_at(sim.live[a].0), Some(112));
    sim.free(a);
    let b = sim.alloc(5000, 16);
    assert_eq!(sim.set.cap_at(sim.live[b].0), Some(5008));
    assert_eq!(sim.set.cap_at(sim.live[b].0 + 16), None);
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

fn replay(sim: &mut Sim, run: &[(bool, usize, usize, usize)], deviate_at: Option<usize>) {
    for (i, &(alloc, size, align, pick)) in run.iter().enumerate() {
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
        plan in proptest::collection::vec((0usize..3, proptest::option::of(0usize..100)), 1..8),
    ) {
        let runs: Vec<_> = seeds.iter().map(|&s| random_run(s, len)).collect();
        let mut sim = Sim::new();
        for (which, deviate) in plan {
            let r = which % runs.len();
            sim.boundary(if which == 2 { None } else { Some(r as u64) });
            replay(&mut sim, &runs[r], deviate.map(|d| d % len));
        }
        sim.boundary(None);
        while !sim.live.is_empty() {
            sim.free(sim.live.len() - 1);
        }
        prop_assert_eq!(sim.blocks_returned, sim.blocks_granted);
    }
}
