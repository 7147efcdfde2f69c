//! Exporting outputs keeps the warm-run promise: a produce-and-export loop
//! whose leases are dropped before the next run takes no system call, page
//! fault or heap allocation; holding a run's leases costs one fresh I/O
//! buffer per held output and leaves execution-arena reuse alone.

use crate::support::measure;
use warmarena::{ExecutionArena, IoArena, IoLease};

const OUTPUTS: [usize; 4] = [4 << 10, 300 << 10, 2 << 20, 9 << 20];
const INTERMEDIATES: [usize; 6] = [1 << 20, 3 << 20, 64 << 10, 5 << 20, 12 << 10, 7 << 20];

/// One run: intermediates in the execution arena, outputs written in the
/// I/O arena and exported into `out`.
fn produce(exec: &ExecutionArena, io: &IoArena, out: &mut Vec<IoLease>, seed: u8) {
    for (k, &size) in INTERMEDIATES.iter().enumerate() {
        let mut t = exec.allocate(size, 64).unwrap();
        t.as_mut_slice().fill(seed ^ k as u8);
        if k % 2 == 1 {
            drop(t);
        } else {
            std::hint::black_box(&t);
        }
    }
    for &size in OUTPUTS.iter() {
        let mut o = io.allocate(size, 64).unwrap();
        o.as_mut_slice().fill(seed);
        out.push(o.into_lease().unwrap());
    }
}

fn ten_runs(exec: &ExecutionArena, io: &IoArena, out: &mut Vec<IoLease>) {
    for r in 1..=10u8 {
        out.clear(); // the caller lets go of the previous run's outputs
        produce(exec, io, out, r);
    }
    out.clear();
}

#[test]
fn ten_warm_produce_and_export_runs_cost_nothing() {
    let mut out = Vec::with_capacity(OUTPUTS.len());
    {
        // Make the code of the measured loop resident on throwaway arenas.
        let (e, i) = (ExecutionArena::new(), IoArena::new());
        produce(&e, &i, &mut out, 0);
        ten_runs(&e, &i, &mut out);
    }
    let (exec, io) = (ExecutionArena::new(), IoArena::new());
    produce(&exec, &io, &mut out, 0);
    out.clear();
    let (e0, i0) = (exec.stats(), io.stats());
    let ((), cost, source) = measure(|| ten_runs(&exec, &io, &mut out));
    let (e1, i1) = (exec.stats(), io.stats());
    println!("10 warm produce-and-export runs: {cost:?} via {source:?}");
    if crate::support::faults_trusted("warm produce-and-export") {
        assert_eq!(cost.minor_faults, 0);
    }
    assert_eq!(cost.heap_calls, 0);
    assert_eq!(
        e1.os.syscalls() + i1.os.syscalls(),
        e0.os.syscalls() + i0.os.syscalls()
    );
    assert_eq!(
        (e1.cold_allocations, i1.cold_allocations),
        (e0.cold_allocations, i0.cold_allocations)
    );
    assert_eq!(
        i1.warm_allocations - i0.warm_allocations,
        10 * OUTPUTS.len() as u64
    );
    assert_eq!(i1.copies, 0);
}

#[test]
fn holding_a_runs_outputs_costs_one_fresh_io_buffer_each() {
    let (exec, io) = (ExecutionArena::new(), IoArena::new());
    let mut out = Vec::new();
    produce(&exec, &io, &mut out, 0);
    out.clear();
    produce(&exec, &io, &mut out, 1);
    let held = std::mem::take(&mut out); // the caller keeps run 1's outputs
    let (e0, i0) = (exec.stats(), io.stats());
    for r in 2..6 {
        out.clear();
        produce(&exec, &io, &mut out, r);
    }
    out.clear();
    let (e1, i1) = (exec.stats(), io.stats());
    assert_eq!(
        i1.cold_allocations - i0.cold_allocations,
        OUTPUTS.len() as u64
    );
    assert_eq!(
        e1.cold_allocations, e0.cold_allocations,
        "execution reuse untouched"
    );
    assert_eq!(
        e1.warm_allocations - e0.warm_allocations,
        4 * INTERMEDIATES.len() as u64
    );
    for l in &held {
        assert!(l.as_slice().iter().all(|&b| b == 1));
    }
}
