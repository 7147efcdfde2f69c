//! Model-based test: random sequences of allocate / free / trim /
//! set_retention_cap against a simple model of the policy. After every step
//! live, retained and peak bytes match exactly, every served-warm flag
//! matches, and no two live buffers overlap or lose their contents.

use crate::policy_model::PolicyModel;
use crate::support::{check, fill};
use proptest::prelude::*;
use warmarena::size_class::capacity;
use warmarena::{Allocation, ArenaConfig, ExecutionArena};

#[derive(Debug, Clone)]
enum Op {
    Alloc { size: usize, align_shift: u8 },
    Free(usize),
    Trim,
    SetCap(Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![
        4 => 1usize..4096,
        3 => 4096usize..(256 << 10),
        1 => (256usize << 10)..(4 << 20),
    ];
    prop_oneof![
        6 => (size, prop_oneof![4 => Just(0u8), 1 => 4u8..13]).prop_map(|(size, align_shift)| Op::Alloc { size, align_shift }),
        4 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::Trim),
        1 => prop::option::of(0usize..(8 << 20)).prop_map(Op::SetCap),
    ]
}

fn run_ops(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let arena = ExecutionArena::with_config(ArenaConfig::default().huge_pages(false));
    let mut model = PolicyModel::default();
    let mut live: Vec<(Allocation, usize, u64)> = Vec::new();
    let mut seed = 0u64;
    for op in ops {
        match op {
            Op::Alloc { size, align_shift } => {
                let align = 1usize << align_shift;
                let mut a = arena.allocate(size, align).unwrap();
                let (class, warm) = model.alloc(size, align);
                prop_assert_eq!(a.capacity(), capacity(class));
                prop_assert_eq!(a.served_warm(), warm);
                prop_assert_eq!(a.as_ptr() as usize % align, 0);
                seed += 1;
                fill(a.as_mut_slice(), seed);
                live.push((a, class, seed));
            }
            Op::Free(i) => {
                if !live.is_empty() {
                    let (a, class, s) = live.swap_remove(i % live.len());
                    prop_assert!(check(a.as_slice(), s), "contents changed while live");
                    drop(a);
                    model.free(class);
                }
            }
            Op::Trim => {
                let expect = model.retained_bytes();
                prop_assert_eq!(arena.trim(), expect);
                model.retained.clear();
            }
            Op::SetCap(c) => {
                arena.set_retention_cap(c.unwrap_or(usize::MAX));
                model.cap = c;
                model.enforce();
            }
        }
        model.check(&arena.stats(), "execution");
        prop_assert_eq!(arena.check_invariants(), Ok(()));
        prop_assert_eq!(model.live_buffers, live.len());
        // No two live buffers overlap.
        let mut spans: Vec<(usize, usize)> = live
            .iter()
            .map(|(a, _, _)| (a.as_ptr() as usize, a.as_ptr() as usize + a.capacity()))
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            prop_assert!(w[0].1 <= w[1].0, "overlap {:?}", w);
        }
    }
    for (a, _, s) in &live {
        prop_assert!(check(a.as_slice(), *s));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn arena_matches_model(ops in prop::collection::vec(op(), 1..120)) {
        run_ops(ops)?;
    }
}
