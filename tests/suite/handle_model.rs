//! Model-based test of the handle layer: random sequences of allocate,
//! export, clone, drop-lease, drop-allocation, trim and drop-arena against a
//! model. Accounting stays exact while the arena is reachable, every buffer
//! keeps its contents while owned, and every buffer is returned exactly once.

use crate::support::{check, fill};
use proptest::prelude::*;
use std::collections::HashMap;
use warmarena::size_class::{capacity, class_of};
use warmarena::{Allocation, IoArena, IoLease};

#[derive(Debug, Clone)]
enum Op {
    Alloc(usize),
    Export(usize),
    Clone(usize),
    DropLease(usize),
    DropAlloc(usize),
    Trim,
    DropArena,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..300_000).prop_map(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Export),
        3 => any::<usize>().prop_map(Op::Clone),
        4 => any::<usize>().prop_map(Op::DropLease),
        2 => any::<usize>().prop_map(Op::DropAlloc),
        1 => Just(Op::Trim),
        1 => Just(Op::DropArena),
    ]
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut arena = Some(IoArena::new());
    let mut allocs: Vec<(Allocation, u64)> = Vec::new();
    let mut leases: Vec<(IoLease, u64)> = Vec::new();
    let mut seed = 0u64;
    let mut allocated = 0u64;
    for op in ops {
        match op {
            Op::Alloc(size) => {
                if let Some(a) = &arena {
                    let mut x = a.allocate(size, 64).unwrap();
                    seed += 1;
                    fill(x.as_mut_slice(), seed);
                    allocs.push((x, seed));
                    allocated += 1;
                }
            }
            Op::Export(i) if !allocs.is_empty() => {
                let (x, s) = allocs.swap_remove(i % allocs.len());
                let p = x.as_ptr();
                let l = x.into_lease().unwrap();
                prop_assert_eq!(l.as_ptr(), p);
                leases.push((l, s));
            }
            Op::Clone(i) if !leases.is_empty() => {
                let (l, s) = &leases[i % leases.len()];
                leases.push((l.clone(), *s));
            }
            Op::DropLease(i) if !leases.is_empty() => {
                let (l, s) = leases.swap_remove(i % leases.len());
                prop_assert!(check(l.as_slice(), s), "leased bytes changed");
                drop(l);
            }
            Op::DropAlloc(i) if !allocs.is_empty() => {
                let (x, s) = allocs.swap_remove(i % allocs.len());
                prop_assert!(check(x.as_slice(), s));
            }
            Op::Trim => {
                if let Some(a) = &arena {
                    a.trim();
                }
            }
            Op::DropArena => arena = None,
            _ => {}
        }
        // Distinct leased buffers, by address.
        let mut leased: HashMap<usize, usize> = HashMap::new();
        for (l, s) in &leases {
            prop_assert!(check(l.as_slice(), *s));
            leased.insert(l.as_ptr() as usize, l.capacity());
        }
        for (l, _) in &leases {
            let owners = leases
                .iter()
                .filter(|(m, _)| m.as_ptr() == l.as_ptr())
                .count();
            prop_assert_eq!(l.owners(), owners);
        }
        if let Some(a) = &arena {
            let st = a.stats();
            let alloc_bytes: usize = allocs.iter().map(|(x, _)| x.capacity()).sum();
            let leased_bytes: usize = leased.values().sum();
            prop_assert_eq!(st.leases, leased.len());
            prop_assert_eq!(st.leased_bytes, leased_bytes);
            prop_assert_eq!(st.live_bytes, alloc_bytes + leased_bytes);
            prop_assert_eq!(st.live_buffers, allocs.len() + leased.len());
            prop_assert_eq!(st.frees, allocated - (allocs.len() + leased.len()) as u64);
            for (x, _) in &allocs {
                let rounded = capacity(class_of(x.len().max(64)).unwrap());
                prop_assert!(x.capacity() >= rounded && x.capacity() <= 2 * rounded);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn handles_match_model(ops in prop::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}
