//! Replays recorded interval traces (`tests/data/minimalloc`,
//! `tests/data/tvm`: one buffer per row, live over `[lower, upper)`) as
//! allocate/free runs through a pattern-mode arena, and prints per trace:
//! the live peak in class capacities (what an ordinary warm arena holds at
//! its peak), the planned block, its ratio to the interval lower bound
//! (the live peak of the bytes asked for) and to the class peak,
//! the time the boundary took to plan the run, hits and misses over five
//! served runs, and the faults and system calls
//! of those runs.
//!
//! `cargo run -p warmarena --release --example pattern_trace [FILE.csv ...]`
//! (files named replace the bundled instances)

use warmarena::faults::FaultCounter;
use warmarena::planner::{lower_bound, parse_csv, Buffer};
use warmarena::{Allocation, ArenaConfig, ExecutionArena};

/// The run a trace stands for: at each moment, the frees due then, then
/// the allocations (so a buffer may take over one that just died).
fn events(bufs: &[Buffer]) -> Vec<(bool, usize)> {
    let mut ev: Vec<(usize, u8, usize)> = Vec::new();
    for (i, b) in bufs.iter().enumerate() {
        if b.is_trivial() {
            continue;
        }
        ev.push((b.lower, 1, i));
        ev.push((b.upper, 0, i));
    }
    ev.sort_unstable();
    ev.into_iter().map(|(_, kind, i)| (kind == 1, i)).collect()
}

fn run(
    arena: &ExecutionArena,
    bufs: &[Buffer],
    ev: &[(bool, usize)],
    slots: &mut [Option<Allocation>],
) {
    for &(alloc, i) in ev {
        if alloc {
            let mut a = arena.allocate(bufs[i].size, 64).expect("allocate");
            a.as_mut_slice()[0] = 1;
            slots[i] = Some(a);
        } else {
            slots[i] = None;
        }
    }
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    println!("| trace | buffers | interval lower bound | live peak (classes) | planned block | block / lower bound | block / peak | plan ms | hits / misses | faults, syscalls (5 runs) |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // Files named on the command line, else the bundled instances.
    let named: Vec<std::path::PathBuf> = std::env::args().skip(1).map(Into::into).collect();
    let dirs: &[&str] = if named.is_empty() {
        &["minimalloc", "tvm"]
    } else {
        &["."]
    };
    for dir in dirs {
        let mut files: Vec<_> = if named.is_empty() {
            std::fs::read_dir(root.join(dir))
                .expect("tests/data")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                .collect()
        } else {
            named.clone()
        };
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let Ok(inst) = parse_csv(&text) else { continue };
            let bufs = inst.buffers;
            let ev = events(&bufs);
            let mut slots: Vec<Option<Allocation>> = (0..bufs.len()).map(|_| None).collect();
            let arena = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
            arena.begin_run();
            arena.reset_peak();
            run(&arena, &bufs, &ev, &mut slots);
            let peak = arena.stats().peak_live_bytes;
            let t = std::time::Instant::now();
            arena.begin_run();
            let plan_ms = t.elapsed().as_secs_f64() * 1e3;
            run(&arena, &bufs, &ev, &mut slots);
            arena.begin_run();
            let s0 = arena.stats();
            let mut faults = FaultCounter::new();
            faults.reset();
            for _ in 0..5 {
                run(&arena, &bufs, &ev, &mut slots);
                arena.begin_run();
            }
            let fl = faults.read();
            let s = arena.stats();
            let block = s.pattern_block_bytes;
            println!(
                "| {}/{} | {} | {} | {} | {} | {:.3} | {:.3} | {:.1} | {} / {} | {}, {} |",
                dir,
                f.file_name().unwrap().to_string_lossy(),
                bufs.len(),
                lower_bound(&bufs),
                peak,
                block,
                block as f64 / lower_bound(&bufs) as f64,
                block as f64 / peak as f64,
                plan_ms,
                s.pattern_hits - s0.pattern_hits,
                s.pattern_misses - s0.pattern_misses,
                fl.minor,
                s.os.syscalls() - s0.os.syscalls(),
            );
        }
    }
}
