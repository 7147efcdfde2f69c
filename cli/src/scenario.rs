//! The six scenarios that define warmarena's promise, driven the same way on
//! every back end: a cold run, then warm runs, each measured for page faults,
//! system calls, bytes from the OS, copies and time.

use super::backend::Backend;
use super::turns::Turn;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use warmarena::faults::FaultCounter;
use warmarena::stats::ArenaStats;

/// A scenario of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// 1: repeated runs, outputs dropped before the next run.
    DropOutputs = 1,
    /// 2: repeated runs while the last 8 runs' outputs stay alive.
    HoldOutputs = 2,
    /// 3: a model dominated by large intermediates with a small output.
    LargeIntermediates = 3,
    /// 4: input shapes alternate between runs.
    AlternatingShapes = 4,
    /// 5: one large one-off run, `trim()`, then normal runs.
    OneOffThenTrim = 5,
    /// 6: runs separated by idle gaps longer than the peers' purge delays.
    IdleGaps = 6,
}

impl Scenario {
    /// All six, in order.
    pub const ALL: [Scenario; 6] = [
        Scenario::DropOutputs,
        Scenario::HoldOutputs,
        Scenario::LargeIntermediates,
        Scenario::AlternatingShapes,
        Scenario::OneOffThenTrim,
        Scenario::IdleGaps,
    ];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::DropOutputs => "drop-outputs",
            Scenario::HoldOutputs => "hold-8-runs",
            Scenario::LargeIntermediates => "large-intermediates",
            Scenario::AlternatingShapes => "alternating-shapes",
            Scenario::OneOffThenTrim => "one-off-then-trim",
            Scenario::IdleGaps => "idle-gaps",
        }
    }

    /// The shape variant of warm run `r` (0 normal, 1 alternate, 2 large).
    fn variant(self, r: usize) -> usize {
        match self {
            Scenario::AlternatingShapes => r % 2,
            _ => 0,
        }
    }
}

/// What one run cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunCost {
    /// New minor page faults of the running thread.
    pub minor_faults: u64,
    /// Wall time in nanoseconds.
    pub nanos: u64,
    /// System calls, where the back end counts them.
    pub syscalls: Option<u64>,
    /// Bytes obtained from the OS, where the back end counts them.
    pub system_bytes: Option<u64>,
}

/// Figures of scenario 5's trim.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrimFigures {
    /// Retained bytes just before the trim (warmarena).
    pub retained_before: Option<usize>,
    /// Bytes the trim released (warmarena).
    pub released: Option<usize>,
    /// RSS just before and after the trim.
    pub rss_before: usize,
    /// RSS after the trim.
    pub rss_after: usize,
}

/// One scenario on one workload and one back end.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario.
    pub scenario: Scenario,
    /// The workload's name.
    pub workload: &'static str,
    /// The back end's name.
    pub backend: &'static str,
    /// The first run.
    pub cold: RunCost,
    /// The measured warm runs.
    pub warm: Vec<RunCost>,
    /// RSS before the scenario started.
    pub rss_before: usize,
    /// RSS after the warm runs.
    pub rss_after: usize,
    /// Payload copies over the warm runs.
    pub warm_copies: u64,
    /// warmarena's arenas before and after the warm runs.
    pub arena: Option<((ArenaStats, ArenaStats), (ArenaStats, ArenaStats))>,
    /// Scenario 5 only.
    pub trim: Option<TrimFigures>,
    /// Outputs per run.
    pub outputs_per_run: usize,
    /// The warm runs of the report's interleaved timing pass, where it
    /// ran: the time figures then come from these.
    pub timed: Option<Vec<RunCost>>,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

impl Row {
    /// The warm runs' nanoseconds: the interleaved pass's where it ran,
    /// else this row's own runs'.
    pub fn warm_nanos(&self) -> Vec<u64> {
        self.timed
            .as_ref()
            .unwrap_or(&self.warm)
            .iter()
            .map(|r| r.nanos)
            .collect()
    }
    /// Median warm-run time in nanoseconds.
    pub fn warm_nanos_median(&self) -> u64 {
        median(self.warm_nanos())
    }
    /// Fastest and slowest warm run.
    pub fn warm_nanos_range(&self) -> (u64, u64) {
        let v = self.warm_nanos();
        let lo = v.iter().copied().min().unwrap_or(0);
        (lo, v.into_iter().max().unwrap_or(0))
    }
    /// Median warm-run time of the row's own block of warm runs (the
    /// interleaved pass aside), in nanoseconds.
    pub fn blocked_nanos_median(&self) -> u64 {
        median(self.warm.iter().map(|r| r.nanos).collect())
    }
    /// Median new minor faults per warm run.
    pub fn warm_faults_median(&self) -> u64 {
        median(self.warm.iter().map(|r| r.minor_faults).collect())
    }
    /// Median system calls per warm run, where counted.
    pub fn warm_syscalls_median(&self) -> Option<u64> {
        let v: Option<Vec<u64>> = self.warm.iter().map(|r| r.syscalls).collect();
        v.map(median)
    }
    /// Median bytes from the OS per warm run, where counted.
    pub fn warm_system_bytes_median(&self) -> Option<u64> {
        let v: Option<Vec<u64>> = self.warm.iter().map(|r| r.system_bytes).collect();
        v.map(median)
    }
}

/// Resident set size of this process in bytes.
pub fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map(|pages| pages * warmarena::page_size())
        .unwrap_or(0)
}

/// How the scenario is run.
#[derive(Debug, Clone, Copy)]
pub struct Drive<'a> {
    /// Measured warm runs.
    pub runs: usize,
    /// Idle time before each warm run of scenario 6.
    pub idle: Duration,
    /// In the report's interleaved timing pass, this back end's place in
    /// the rotation: each warm run starts with [`Turn::rotate`], so the
    /// other back ends' warm runs of the same index come between.
    pub turn: Option<&'a Turn<'a>>,
}

/// Runs `sc` on back end `b` with `run(variant)` doing one run and returning
/// the run's exported outputs.
pub fn drive<B: Backend>(
    b: &B,
    sc: Scenario,
    workload: &'static str,
    d: Drive<'_>,
    faults: &mut FaultCounter,
    mut run: impl FnMut(usize) -> Option<Vec<B::Out>>,
) -> Result<Row, String> {
    let refused = || format!("{} refused an allocation in {}", b.name(), sc.name());
    let mut timed =
        |variant: usize, faults: &mut FaultCounter| -> Result<(RunCost, Vec<B::Out>), String> {
            let (sys0, bytes0) = (b.syscalls(), b.system_bytes());
            faults.reset();
            let t0 = Instant::now();
            let outs = run(variant).ok_or_else(refused)?;
            let nanos = t0.elapsed().as_nanos() as u64;
            let f = faults.read();
            let delta = |a: Option<u64>, z: Option<u64>| match (a, z) {
                (Some(a), Some(z)) => Some(z.saturating_sub(a)),
                _ => None,
            };
            Ok((
                RunCost {
                    minor_faults: f.minor,
                    nanos,
                    syscalls: delta(sys0, b.syscalls()),
                    system_bytes: delta(bytes0, b.system_bytes()),
                },
                outs,
            ))
        };
    let rss_before = rss_bytes();
    let mut held: VecDeque<Vec<B::Out>> = VecDeque::new();
    let keep = if sc == Scenario::HoldOutputs { 8 } else { 0 };
    let hold = |outs: Vec<B::Out>, held: &mut VecDeque<Vec<B::Out>>| {
        if keep > 0 {
            held.push_back(outs);
            while held.len() > keep {
                held.pop_front();
            }
        }
    };
    let mut trim = None;
    let (cold, outs) = if sc == Scenario::OneOffThenTrim {
        let (_, big) = timed(2, faults)?;
        drop(big);
        let retained_before = b
            .arena_stats()
            .map(|(e, i)| e.retained_bytes + i.retained_bytes);
        let rss_pre = rss_bytes();
        let released = b.trim();
        trim = Some(TrimFigures {
            retained_before,
            released,
            rss_before: rss_pre,
            rss_after: rss_bytes(),
        });
        timed(0, faults)?
    } else {
        timed(sc.variant(0), faults)?
    };
    let outputs_per_run = outs.len();
    hold(outs, &mut held);
    if sc == Scenario::AlternatingShapes {
        // The other shape's first run is a warm-up too.
        let (_, o) = timed(1, faults)?;
        hold(o, &mut held);
    }
    for _ in 0..b.extra_warm_up_runs() {
        let shapes: &[usize] = if sc == Scenario::AlternatingShapes {
            &[0, 1]
        } else {
            &[sc.variant(0)]
        };
        for &v in shapes {
            let (_, o) = timed(v, faults)?;
            hold(o, &mut held);
        }
    }
    let arena_before = b.arena_stats();
    let copies0 = b.copies();
    let mut warm = Vec::with_capacity(d.runs);
    for r in 0..d.runs {
        if let Some(t) = d.turn {
            // The others ran meanwhile: one untimed run (the shape that
            // precedes run `r`) first, so that the timed one follows a run
            // back to back, as in a block (see `report::interleaved_times`).
            t.rotate();
            let (_, o) = timed(sc.variant(r + 1), faults)?;
            hold(o, &mut held);
        }
        if sc == Scenario::IdleGaps {
            std::thread::sleep(d.idle);
        }
        let (c, outs) = timed(sc.variant(r), faults)?;
        hold(outs, &mut held);
        warm.push(c);
    }
    let rss_after = rss_bytes();
    let arena_after = b.arena_stats();
    let warm_copies = b.copies() - copies0;
    drop(held);
    Ok(Row {
        scenario: sc,
        workload,
        backend: b.name(),
        cold,
        warm,
        rss_before,
        rss_after,
        warm_copies,
        arena: arena_before.zip(arena_after),
        trim,
        outputs_per_run,
        timed: None,
    })
}
