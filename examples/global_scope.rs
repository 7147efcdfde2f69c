//! An unmodified third-party workload (`serde_json` parsing, walking and
//! re-serializing a ~6 MiB document) run 1 + 10 times with `ScopedGlobal`
//! installed: once inside a scope on an execution arena, once without, with
//! the figures side by side. Inside the scope, the 10 warm iterations should
//! call the system allocator 0 times and take 0 new page faults.
//!
//! A third run, unscoped over mimalloc instead of the system allocator,
//! is there for reference (the scoped allocator's backing switches to
//! mimalloc for it; frees go to whichever allocator owns the pointer).
//!
//! `cargo run --release --example global_scope` (exits non-zero if the
//! scoped warm iterations call the system allocator or fault).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Instant;
use warmarena::faults::{pre_touch_stack, FaultCounter};
use warmarena::global::{self, CountingSystem, ScopedGlobal};
use warmarena::{ArenaConfig, ExecutionArena};

#[global_allocator]
static GLOBAL: ScopedGlobal<Backing> = ScopedGlobal::over(Backing);

/// New allocations go to mimalloc while set (the reference run).
static USE_MIMALLOC: AtomicBool = AtomicBool::new(false);

/// The scoped allocator's backing: the counting system allocator, or
/// mimalloc during the reference run; a free goes to the allocator that
/// owns the pointer, whichever is current.
struct Backing;

fn mimalloc_owns(p: *mut u8) -> bool {
    // SAFETY: a query on any address; mimalloc only compares it with its
    // own regions.
    unsafe { libmimalloc_sys::mi_is_in_heap_region(p.cast()) }
}

// SAFETY: every call forwards to `CountingSystem` or mimalloc, each a valid
// allocator; a block is freed or resized by the one that made it.
unsafe impl GlobalAlloc for Backing {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if USE_MIMALLOC.load(Relaxed) {
            // SAFETY: forwarded contract.
            unsafe { mimalloc::MiMalloc.alloc(l) }
        } else {
            // SAFETY: forwarded contract.
            unsafe { CountingSystem.alloc(l) }
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if mimalloc_owns(p) {
            // SAFETY: mimalloc made it.
            unsafe { mimalloc::MiMalloc.dealloc(p, l) }
        } else {
            // SAFETY: the system allocator made it.
            unsafe { CountingSystem.dealloc(p, l) }
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if mimalloc_owns(p) {
            // SAFETY: mimalloc made it.
            unsafe { mimalloc::MiMalloc.realloc(p, l, new) }
        } else {
            // SAFETY: the system allocator made it.
            unsafe { CountingSystem.realloc(p, l, new) }
        }
    }
}

fn system_calls() -> u64 {
    CountingSystem::calls()
}

/// A JSON document of `n` records with strings, numbers and nested arrays.
fn document(n: usize) -> String {
    let mut s = String::from("[");
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"id":{i},"name":"user number {i}","score":{:.3},"tags":["t{}","t{}","t{}"],"nested":{{"xs":[{},{},{},{}],"flag":{}}}}}"#,
            i as f64 * 0.37,
            i % 11,
            i % 13,
            i % 17,
            i,
            i * 2,
            i * 3,
            i * 4,
            i % 2 == 0
        ));
    }
    s.push(']');
    s
}

/// The third-party workload: parse into a `Value` tree, walk it, print it back.
fn workload(doc: &str) -> (f64, usize) {
    let v: serde_json::Value = serde_json::from_str(doc).expect("valid JSON");
    let mut sum = 0.0;
    let mut strings = 0;
    for rec in v.as_array().expect("an array") {
        sum += rec["score"].as_f64().unwrap_or(0.0);
        strings += rec["tags"].as_array().map_or(0, Vec::len);
        sum += rec["nested"]["xs"]
            .as_array()
            .map_or(0.0, |xs| xs.iter().filter_map(|x| x.as_f64()).sum());
    }
    let out = serde_json::to_string(&v).expect("serializable");
    (sum, strings + out.len())
}

#[derive(Debug, Clone, Copy, Default)]
struct Iter {
    system_calls: u64,
    faults: u64,
    micros: u128,
}

fn one(doc: &str, arena: Option<&ExecutionArena>, counter: &mut FaultCounter) -> Iter {
    pre_touch_stack();
    let calls = system_calls();
    counter.reset();
    let t = Instant::now();
    let r = match arena {
        Some(a) => global::scope(a, || workload(doc)),
        None => workload(doc),
    };
    let micros = t.elapsed().as_micros();
    let faults = counter.read();
    std::hint::black_box(r);
    Iter {
        system_calls: system_calls() - calls,
        faults: faults.minor + faults.major,
        micros,
    }
}

fn run(doc: &str, arena: Option<&ExecutionArena>, counter: &mut FaultCounter) -> (Iter, Vec<Iter>) {
    let cold = one(doc, arena, counter);
    let warm = (0..10).map(|_| one(doc, arena, counter)).collect();
    (cold, warm)
}

fn median(mut v: Vec<u128>) -> u128 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let doc = document(40_000);
    let mut counter = FaultCounter::new();
    // The first execution of code pages faults too: run both shapes once on a
    // throwaway arena (and once unscoped) so that only data pages can fault
    // in the measured runs.
    {
        let throwaway = ExecutionArena::new();
        one(&doc, Some(&throwaway), &mut counter);
        one(&doc, Some(&throwaway), &mut counter);
        one(&doc, None, &mut counter);
    }
    let arena = ExecutionArena::new();
    let g0 = global::stats();
    let (s_cold, s_warm) = run(&doc, Some(&arena), &mut counter);
    let g1 = global::stats();
    let (u_cold, u_warm) = run(&doc, None, &mut counter);
    // Pattern mode: the same scoped runs on an arena that learns the first
    // run and serves the next ones from one planned block.
    let pattern = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
    let (p_cold, p_warm) = run(&doc, Some(&pattern), &mut counter);
    USE_MIMALLOC.store(true, Relaxed);
    one(&doc, None, &mut counter); // mimalloc's code pages
    let (m_cold, m_warm) = run(&doc, None, &mut counter);
    USE_MIMALLOC.store(false, Relaxed);

    println!(
        "serde_json: parse + walk + serialize a {:.1} MiB document, 1 cold + 10 warm iterations, faults via {:?}",
        doc.len() as f64 / (1 << 20) as f64,
        counter.source()
    );
    println!();
    println!("| mode | cold system allocs | cold faults | cold ms | warm system allocs (10 runs) | warm faults (10 runs) | warm ms median [min-max] |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, cold, warm) in [
        ("scoped (arena)", s_cold, &s_warm),
        ("unscoped (system)", u_cold, &u_warm),
        ("scoped (pattern arena)", p_cold, &p_warm),
        ("unscoped (mimalloc, reference)", m_cold, &m_warm),
    ] {
        println!(
            "| {name} | {} | {} | {:.2} | {} | {} | {:.2} [{:.2}-{:.2}] |",
            cold.system_calls,
            cold.faults,
            cold.micros as f64 / 1000.0,
            warm.iter().map(|i| i.system_calls).sum::<u64>(),
            warm.iter().map(|i| i.faults).sum::<u64>(),
            median(warm.iter().map(|i| i.micros).collect()) as f64 / 1000.0,
            warm.iter().map(|i| i.micros).min().unwrap_or(0) as f64 / 1000.0,
            warm.iter().map(|i| i.micros).max().unwrap_or(0) as f64 / 1000.0
        );
    }
    // In order: while a small class's buffers came back from the depot
    // newest first, every second iteration got its addresses reversed and
    // ran slower; the alternation shows here.
    let in_order = |w: &[Iter]| {
        w.iter()
            .map(|i| format!("{:.1}", i.micros as f64 / 1000.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!();
    println!("warm ms in order, scoped (arena): {}", in_order(&s_warm));
    println!(
        "warm ms in order, unscoped (mimalloc): {}",
        in_order(&m_warm)
    );
    let warm_ms = |w: &[Iter]| median(w.iter().map(|i| i.micros).collect()) as f64;
    println!();
    println!(
        "warm time, scoped / unscoped system: {:.2}; scoped / unscoped mimalloc: {:.2}",
        warm_ms(&s_warm) / warm_ms(&u_warm),
        warm_ms(&s_warm) / warm_ms(&m_warm)
    );
    let s = arena.stats();
    println!();
    println!(
        "arena: {} cold + {} warm allocations, retained {:.1} MiB, {} system calls",
        s.cold_allocations,
        s.warm_allocations,
        s.retained_bytes as f64 / (1 << 20) as f64,
        s.os.syscalls()
    );
    println!(
        "global (scoped runs): {} scoped allocs ({:.1} MiB), {} fallback, {} metadata, {} in-place / {} moved reallocs",
        g1.scoped_allocs - g0.scoped_allocs,
        (g1.scoped_bytes - g0.scoped_bytes) as f64 / (1 << 20) as f64,
        g1.fallback_allocs - g0.fallback_allocs,
        g1.metadata_allocs - g0.metadata_allocs,
        g1.realloc_in_place - g0.realloc_in_place,
        g1.realloc_moved - g0.realloc_moved
    );
    let p = pattern.stats();
    let held =
        |s: &warmarena::ArenaStats| (s.live_bytes + s.retained_bytes) as f64 / (1 << 20) as f64;
    println!(
        "held after the runs (live + retained): arena {:.2} MiB, pattern arena {:.2} MiB (block {:.2} MiB); \
         the workload's live peak (arena) {:.2} MiB: held / peak {:.2} and {:.2}",
        held(&s),
        held(&p),
        p.pattern_block_bytes as f64 / (1 << 20) as f64,
        s.peak_live_bytes as f64 / (1 << 20) as f64,
        held(&s) * (1 << 20) as f64 / s.peak_live_bytes as f64,
        held(&p) * (1 << 20) as f64 / s.peak_live_bytes as f64,
    );
    println!(
        "pattern arena: {} learned, {} hits, {} misses, {} planned allocations, {} cold allocations",
        p.pattern_learned,
        p.pattern_hits,
        p.pattern_misses,
        p.pattern_planned_allocations,
        p.cold_allocations
    );
    let warm_calls: u64 = s_warm.iter().map(|i| i.system_calls).sum();
    let warm_faults: u64 = s_warm.iter().map(|i| i.faults).sum();
    if warm_calls != 0 || warm_faults != 0 {
        eprintln!("FAIL: scoped warm iterations made {warm_calls} system allocations and took {warm_faults} faults");
        std::process::exit(1);
    }
}
