//! An executor for the example network, end to end through the session API:
//! one warm-up run, then ten runs, printing what the ten cost.
//!
//! `cargo run --release --example executor`

use warmarena::faults::FaultCounter;
use warmarena::session::{ArenaRun, Session};
use warmarena::{ExecutionArena, IoArena};
use warmarena_net::{bytes::as_bytes, Net, NetConfig};

fn main() {
    let net = Net::new(NetConfig::standard(), 42);
    // Arenas live for the session (or the process), never for one run.
    let session =
        Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).expect("valid graph");
    let image = net.example_input(1);
    let mut ctx = ArenaRun::new(&session);

    let warm_up = net.run(&mut ctx, &image).expect("run");
    let (features, logits) = net.reference(&image);
    assert_eq!(warm_up.logits.as_slice(), as_bytes(&logits));
    assert_eq!(warm_up.features.as_slice(), as_bytes(&features));
    drop(warm_up);

    let (e0, i0) = (
        session.execution_arena().stats(),
        session.io_arena().stats(),
    );
    let mut faults = FaultCounter::new();
    let t = std::time::Instant::now();
    let mut held = Vec::new();
    for _ in 0..10 {
        ctx.clear();
        held.push(net.run(&mut ctx, &image).expect("run"));
        held.clear(); // the caller lets go of each run's outputs
    }
    let elapsed = t.elapsed();
    let f = faults.read();
    let (e1, i1) = (
        session.execution_arena().stats(),
        session.io_arena().stats(),
    );
    println!(
        "example network, 10 runs after one warm-up ({:.2} ms per run):",
        elapsed.as_secs_f64() * 1e3 / 10.0
    );
    println!(
        "  new minor page faults: {} (via {:?})",
        f.minor,
        faults.source()
    );
    println!(
        "  system calls: {}",
        (e1.os.syscalls() + i1.os.syscalls()) - (e0.os.syscalls() + i0.os.syscalls())
    );
    println!(
        "  cold allocations: {}",
        (e1.cold_allocations + i1.cold_allocations) - (e0.cold_allocations + i0.cold_allocations)
    );
    println!(
        "  warm allocations: {}",
        (e1.warm_allocations + i1.warm_allocations) - (e0.warm_allocations + i0.warm_allocations)
    );
    println!("  payload copies: {}", e1.copies + i1.copies);
    println!(
        "  execution arena: peak live {} B, retained {} B",
        e1.peak_live_bytes, e1.retained_bytes
    );
    println!(
        "  I/O arena: retained {} B, leases outstanding {}",
        i1.retained_bytes, i1.leases
    );
}
