//! The basics: `Vec`, `Box` and a hashbrown map living in an
//! [`ExecutionArena`], the arena's statistics before and after, and the
//! promise checked: after the first run, a run takes no cold allocation
//! (every buffer comes from one the arena already holds, pages and all).
//!
//! `cargo run --release --example basics`

use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use hashbrown::HashMap;
use warmarena::{ArenaStats, ExecutionArena};

/// One "run" of a model's bookkeeping: a vector of activations, a boxed
/// scratch tile and a map from token to position, all from `exec`.
fn one_run(exec: &ExecutionArena, tokens: &[u32]) -> u64 {
    // 1 MiB of activations: served by the execution heap (64 KiB and up).
    let mut activations: Vec<f32, &ExecutionArena> = Vec::with_capacity_in(1 << 18, exec);
    activations.extend(tokens.iter().cycle().take(1 << 18).map(|&t| t as f32 * 0.5));

    // A fixed-size scratch tile, boxed in the arena.
    let mut tile = Box::new_in([0u8; 4096], exec);
    for (i, b) in tile.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }

    // A hash map in the arena: its table is one arena buffer.
    let mut position: HashMap<u32, usize, _, &ExecutionArena> =
        HashMap::with_capacity_in(tokens.len(), exec);
    for (i, &t) in tokens.iter().enumerate() {
        position.entry(t).or_insert(i);
    }

    let checksum = activations.iter().map(|&x| x as u64).sum::<u64>()
        + tile.iter().map(|&b| u64::from(b)).sum::<u64>()
        + position.values().map(|&i| i as u64).sum::<u64>();
    // Everything is dropped here: back to the arena, pages kept.
    checksum
}

fn print_stats(when: &str, s: &ArenaStats) {
    println!(
        "{when:<28} cold allocations {:>3}, warm allocations {:>4}, live {:>8} B, retained {:>8} B, peak {:>8} B, maps {}",
        s.cold_allocations, s.warm_allocations, s.live_bytes, s.retained_bytes, s.peak_live_bytes, s.os.maps
    );
}

fn main() {
    // One arena for the life of the model, never one per run.
    let exec = ExecutionArena::new();
    let tokens: std::vec::Vec<u32> = (0..2048u32)
        .map(|i| i.wrapping_mul(2654435761) % 5000)
        .collect();

    print_stats("before any run:", &exec.stats());
    let first = one_run(&exec, &tokens);
    let after_cold = exec.stats();
    print_stats("after the first (cold) run:", &after_cold);

    const WARM_RUNS: u64 = 5;
    for _ in 0..WARM_RUNS {
        assert_eq!(one_run(&exec, &tokens), first, "same input, same result");
    }
    let after_warm = exec.stats();
    print_stats(&format!("after {WARM_RUNS} warm runs:"), &after_warm);

    let cold = after_warm.cold_allocations - after_cold.cold_allocations;
    let warm = after_warm.warm_allocations - after_cold.warm_allocations;
    let maps = after_warm.os.maps - after_cold.os.maps;
    println!("warm runs: {cold} cold allocations, {warm} warm allocations, {maps} new mappings");
    assert_eq!(cold, 0, "a warm run takes no cold allocation");
    assert_eq!(maps, 0, "a warm run maps no memory");
    assert_eq!(
        warm,
        after_cold.cold_allocations * WARM_RUNS,
        "every buffer of a warm run is reused"
    );
    assert_eq!(after_warm.live_bytes, 0, "every buffer went back");
}
