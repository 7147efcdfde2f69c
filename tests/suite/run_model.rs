//! The run-owning small path against a model of its policy, on one thread:
//! a request is served from a freed slot of its class whenever the heap or
//! the arena holds one, and from an untouched slot only when none is left;
//! `trim` releases every empty run. Per class the model keeps the live
//! slots and the resident ones (written since their run's pages were last
//! released); a class that still has live slots at a trim may keep some
//! resident slots in partly used runs, so its count is unknown until it
//! has no live slot at the next trim.

use proptest::prelude::*;
use std::collections::HashMap;
use warmarena::{Allocation, ArenaConfig, ExecutionArena};

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    Free(usize),
    Boundary,
    Trim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop_oneof![4 => 1usize..512, 2 => 512usize..8192, 1 => 8192usize..(64 << 10)]
            .prop_map(Op::Alloc),
        5 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::Boundary),
        1 => Just(Op::Trim),
    ]
}

#[derive(Default, Clone, Copy)]
struct Class {
    live: usize,
    resident: usize,
    known: bool,
}

fn run_ops(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let arena = ExecutionArena::with_config(ArenaConfig::default().run_ownership(true));
    // By capacity (one class each).
    let mut model: HashMap<usize, Class> = HashMap::new();
    let mut live: Vec<Allocation> = Vec::new();
    let (mut live_bytes, mut peak) = (0usize, 0usize);
    for op in ops {
        match op {
            Op::Alloc(size) => {
                let a = arena.allocate(size, 8).unwrap();
                let cap = a.capacity();
                prop_assume!(cap < 64 << 10);
                let c = model.entry(cap).or_insert(Class {
                    known: true,
                    ..Class::default()
                });
                if c.known {
                    prop_assert_eq!(a.served_warm(), c.resident > c.live, "cap {}", cap);
                }
                if !a.served_warm() {
                    c.resident += 1;
                }
                c.live += 1;
                live_bytes += cap;
                peak = peak.max(live_bytes);
                live.push(a);
            }
            Op::Free(i) => {
                if !live.is_empty() {
                    let a = live.swap_remove(i % live.len());
                    let cap = a.capacity();
                    drop(a);
                    model.get_mut(&cap).unwrap().live -= 1;
                    live_bytes -= cap;
                }
            }
            Op::Boundary => arena.begin_run(),
            Op::Trim => {
                let released = arena.trim();
                let exact = model.values().all(|c| c.known && c.live == 0);
                let mut sure = 0;
                for (&cap, c) in model.iter_mut() {
                    if c.live == 0 {
                        if c.known {
                            sure += c.resident * cap;
                        }
                        c.resident = 0;
                        c.known = true;
                    } else {
                        c.known = false;
                    }
                }
                if exact {
                    // Every run is empty: every resident slot goes.
                    prop_assert_eq!(released, sure);
                } else {
                    prop_assert!(released >= sure, "trim released {} < {}", released, sure);
                }
            }
        }
        let s = arena.stats();
        prop_assert_eq!(s.live_bytes, live_bytes);
        prop_assert_eq!(s.live_buffers, live.len());
        prop_assert_eq!(s.peak_live_bytes, peak);
        if model.values().all(|c| c.known) {
            let retained: usize = model
                .iter()
                .map(|(&cap, c)| (c.resident - c.live) * cap)
                .sum();
            prop_assert_eq!(s.retained_bytes, retained);
        }
    }
    drop(live);
    let s = arena.stats();
    prop_assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 96 }))]

    #[test]
    fn run_ownership_matches_its_model(ops in prop::collection::vec(op(), 1..300)) {
        run_ops(ops)?;
    }
}

/// A repeated run, with a boundary before each, takes no new slot after
/// the first, whatever order its buffers are freed in.
#[test]
fn a_repeated_run_takes_no_new_slot_in_any_free_order() {
    let arena = ExecutionArena::with_config(ArenaConfig::default().run_ownership(true));
    let sizes: Vec<usize> = (0..3000).map(|i| 16 + (i * 7919) % 3000).collect();
    let mut cold = 0;
    for run in 0..6 {
        arena.begin_run();
        let mut bufs: Vec<_> = sizes
            .iter()
            .map(|&s| arena.allocate(s, 8).unwrap())
            .collect();
        match run % 3 {
            0 => drop(bufs),
            1 => bufs.drain(..).rev().for_each(drop),
            _ => {
                let mut k = 0usize;
                while !bufs.is_empty() {
                    k = (k + 7) % bufs.len();
                    drop(bufs.swap_remove(k));
                }
            }
        }
        let s = arena.stats();
        if run == 0 {
            cold = s.cold_allocations;
        }
        assert_eq!(s.cold_allocations, cold, "run {run} took new slots");
    }
}
