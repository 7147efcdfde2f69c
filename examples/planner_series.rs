//! Writes the planner's scaling series as MiniMalloc CSV files, to measure
//! the release `warmarena plan` binary on them (`/usr/bin/time -v`).
//!
//! `cargo run --release --example planner_series -- DIR [train|held-out]`
//! writes, for one split of seeds (`train`: seeds below
//! `synth::HELD_OUT`, looked at when tuning; `held-out`: from it on, only
//! measured):
//!
//! * `s1_tile_62k.csv`: IOPDDL S_1 tiled three times at half its span,
//!   sizes perturbed by up to 10 %, cut to 62 185 buffers (the size of the
//!   largest IOPDDL trace the planner was first sized for);
//! * `bert_x2.csv`: SOMAS bert_base twice, one after the other, perturbed;
//! * `power_law_{10k,100k,600k}.csv`: `synth::power_law`;
//! * `serde_600k.csv`: `synth::short_lived` (600 000 buffers, about 64
//!   live at a time, 64 B to 4 KiB);
//! * `s1_x35_1m.csv`: S_1 35 times one after the other (998 410 buffers).
//!
//! The traces that need S_1 or bert_base read them from
//! `$WARMARENA_DATA/planner` (default `../shared/data`) and are skipped,
//! with a line saying so, when absent.

use std::path::{Path, PathBuf};

use warmarena::planner::{parse_csv, synth, write_csv, Buffer};

fn load(root: &Path, rel: &str) -> Option<Vec<Buffer>> {
    let text = std::fs::read_to_string(root.join(rel)).ok()?;
    Some(parse_csv(&text).ok()?.buffers)
}

fn write(dir: &Path, name: &str, bufs: &[Buffer]) {
    let ids: Vec<String> = (0..bufs.len()).map(|i| i.to_string()).collect();
    let mut text = write_csv(&ids, bufs, &vec![0; bufs.len()]);
    // Drop the offset column: these are problems, not solutions.
    text = text
        .lines()
        .map(|l| &l[..l.rfind(',').unwrap_or(l.len())])
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    std::fs::write(dir.join(name), text).expect("write the series file");
    println!("{name}: {} buffers", bufs.len());
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| ".".to_string()));
    let held_out = args.next().as_deref() == Some("held-out");
    let seed = if held_out { synth::HELD_OUT + 17 } else { 2 };
    std::fs::create_dir_all(&dir).expect("create the output folder");
    let root = std::env::var_os("WARMARENA_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"))
        .join("planner");
    match load(&root, "iopddl/S_1.csv") {
        Some(s1) => {
            let t = s1.iter().map(|b| b.upper).max().unwrap_or(0);
            let mut tiled = synth::perturb(&synth::tile(&s1, 3, t / 2), seed, 10, 0);
            tiled.truncate(62_185);
            write(&dir, "s1_tile_62k.csv", &tiled);
            write(&dir, "s1_x35_1m.csv", &synth::tile(&s1, 35, t));
        }
        None => println!("skipped the S_1 series: {} not found", root.display()),
    }
    match load(&root, "somas/bert_base.csv") {
        Some(bert) => {
            let t = bert.iter().map(|b| b.upper).max().unwrap_or(0);
            let b2 = synth::perturb(&synth::tile(&bert, 2, t), seed, 10, 2);
            write(&dir, "bert_x2.csv", &b2);
        }
        None => println!("skipped bert_x2: {} not found", root.display()),
    }
    for (name, n) in [("10k", 10_000), ("100k", 100_000), ("600k", 600_000)] {
        write(
            &dir,
            &format!("power_law_{name}.csv"),
            &synth::power_law(n, seed + n as u64),
        );
    }
    write(
        &dir,
        "serde_600k.csv",
        &synth::short_lived(600_000, 64, seed),
    );
}
