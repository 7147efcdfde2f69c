//! The shared scratch pool under load: no two claimants ever hold the same
//! bytes, and the memory it holds is max(s_i) where private engines hold
//! sum(s_i). Every assertion is a count or a byte figure, never a time.

use std::sync::Mutex;
use warmarena::page_size;
use warmarena::scratch::{DeviceId, EngineScratch, Lane, ScratchMode, ScratchPool};

/// The address ranges claimed right now, to catch any overlap directly (the
/// written pattern catches it a second way).
#[derive(Default)]
struct LiveRanges(Mutex<Vec<(usize, usize, usize)>>);

impl LiveRanges {
    fn enter(&self, who: usize, start: usize, len: usize) {
        let mut live = self.0.lock().unwrap();
        for &(w, s, l) in live.iter() {
            assert!(
                start + len <= s || s + l <= start,
                "claimants {who} and {w} hold overlapping scratch at once"
            );
        }
        live.push((who, start, len));
    }

    fn leave(&self, who: usize) {
        let mut live = self.0.lock().unwrap();
        let i = live.iter().position(|&(w, ..)| w == who).unwrap();
        live.swap_remove(i);
    }
}

const THREADS: usize = 8;
const ENGINES_PER_THREAD: usize = 12;
const ROUNDS: usize = if cfg!(miri) { 1 } else { 40 };

/// Engine requirements of differing sizes, some not page multiples, one 0.
fn requirement(thread: usize, engine: usize) -> usize {
    match (thread * ENGINES_PER_THREAD + engine) % 7 {
        0 => 0,
        k => k * 3001 + thread * 17,
    }
}

/// Runs every engine of every thread `ROUNDS` times; `lane_of(thread)` says
/// which lane a thread claims on. Each execution fills its whole scratch
/// with a byte unique to the thread, yields, and checks the byte survived.
fn stress(
    pool: &ScratchPool,
    mode_of: impl Fn(usize) -> ScratchMode + Sync,
    lane_of: impl Fn(usize) -> Lane + Sync,
) {
    let live = LiveRanges::default();
    // No thread exits before all are done: a thread's lane goes to the
    // next thread that asks once it exits (`Lane::current_thread`).
    let all_done = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (live, mode_of, lane_of, all_done) = (&live, &mode_of, &lane_of, &all_done);
            s.spawn(move || {
                let engines: Vec<EngineScratch> = (0..ENGINES_PER_THREAD)
                    .map(|e| {
                        pool.engine(DeviceId::HOST, requirement(t, e), mode_of(e))
                            .unwrap()
                    })
                    .collect();
                let mark = 0x10 + t as u8;
                for round in 0..ROUNDS {
                    for (i, e) in engines.iter().enumerate() {
                        // Vary the request below the requirement too.
                        let want = match e.requirement() {
                            0 => 0,
                            r => r - (round * 97 + i) % r.min(500),
                        };
                        let mut g = e.claim_on(lane_of(t), want).unwrap();
                        assert_eq!(g.len(), want);
                        if want > 0 {
                            live.enter(t, g.as_ptr().as_ptr() as usize, want);
                        }
                        g.as_mut_slice().unwrap().fill(mark);
                        std::thread::yield_now();
                        let ok = g.as_slice().unwrap().iter().all(|&b| b == mark);
                        if want > 0 {
                            live.leave(t);
                        }
                        assert!(ok, "thread {t}'s scratch was written by someone else");
                    }
                }
                all_done.wait();
            });
        }
    });
}

#[test]
#[cfg_attr(miri, ignore)] // minutes under Miri; the unit tests cover the protocol there
fn eight_threads_on_one_lane_never_share_bytes() {
    let pool = ScratchPool::new();
    stress(&pool, |_| ScratchMode::Shared, |_| Lane::DEFAULT);
    let s = pool.stats(DeviceId::HOST).unwrap();
    let executions = (0..THREADS)
        .flat_map(|t| (0..ENGINES_PER_THREAD).map(move |e| requirement(t, e)))
        .filter(|&r| r > 0)
        .count() as u64
        * ROUNDS as u64;
    assert_eq!(s.claims, executions);
    assert_eq!(s.lanes.len(), 1);
    let largest = (0..THREADS)
        .flat_map(|t| (0..ENGINES_PER_THREAD).map(move |e| requirement(t, e)))
        .max()
        .unwrap();
    assert_eq!(s.held_bytes, largest.next_multiple_of(page_size()));
    assert_eq!(
        s.shared_engines, 0,
        "the engines are gone, the buffer stays"
    );
}

#[test]
#[cfg_attr(miri, ignore)] // minutes under Miri; the unit tests cover the protocol there
fn eight_threads_on_three_lanes_run_at_once_and_never_share_bytes() {
    let pool = ScratchPool::new();
    // Threads 0,3,6 / 1,4,7 / 2,5 share a lane: concurrency across lanes,
    // contention within one. Every fourth engine is private.
    let mode = |e: usize| {
        if e % 4 == 3 {
            ScratchMode::Private
        } else {
            ScratchMode::Shared
        }
    };
    stress(&pool, mode, |t| Lane(1 + (t % 3) as u64));
    let s = pool.stats(DeviceId::HOST).unwrap();
    let used: Vec<_> = s.lanes.iter().filter(|l| l.claims > 0).collect();
    assert_eq!(used.len(), 3);
    assert_eq!(s.lanes[0].claims, 0, "the default lane was never used");
    assert_eq!(
        s.private_bytes, 0,
        "private buffers left with their engines"
    );
    assert_eq!(s.held_bytes, s.shared_bytes);
    assert!(s.shared_bytes <= 3 * s.lanes.iter().map(|l| l.capacity).max().unwrap());
}

#[test]
#[cfg_attr(miri, ignore)] // minutes under Miri; the unit tests cover the protocol there
fn eight_threads_on_their_own_lanes() {
    let pool = ScratchPool::new();
    stress(&pool, |_| ScratchMode::Shared, |_| Lane::current_thread());
    let s = pool.stats(DeviceId::HOST).unwrap();
    assert_eq!(s.lanes.iter().filter(|l| l.claims > 0).count(), THREADS);
    assert_eq!(s.contended_claims, 0, "no lane had two claimants");
}

/// Threads that come and go one after another, each claiming on its own
/// lane: the lanes of exited threads are reused, so the pool does not
/// keep a lane and a buffer for every thread it ever served.
#[test]
#[cfg_attr(miri, ignore)] // spawns 50 threads
fn threads_in_turn_reuse_lanes_and_their_buffers() {
    let pool = ScratchPool::new();
    let engine = pool
        .engine(DeviceId::HOST, 4 * page_size(), ScratchMode::Shared)
        .unwrap();
    let threads = 50;
    for _ in 0..threads {
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut g = engine
                    .claim_on(Lane::current_thread(), page_size())
                    .unwrap();
                g.as_mut_slice().unwrap().fill(7);
            });
        });
    }
    let s = pool.stats(DeviceId::HOST).unwrap();
    let lanes = s.lanes.iter().filter(|l| l.claims > 0).count();
    // Other tests' threads may take a given-back lane number in between,
    // so a few more than one lane can appear; one per thread cannot.
    println!(
        "{threads} threads in turn used {lanes} lanes, holding {} bytes",
        s.held_bytes
    );
    assert!(
        lanes < threads / 2,
        "{lanes} lanes for {threads} threads in turn"
    );
    assert!(s.held_bytes <= lanes * 4 * page_size());
}

/// Six engines needing differing sizes on one device, shaped like the
/// reviewed measurement with differing sizes (largest about a third of the
/// sum). In pages, so the host device's rounding does not blur the figures.
const SIX: [usize; 6] = [7, 18, 3, 12, 25, 5];

fn run_six(pool: &ScratchPool, mode: ScratchMode) -> Vec<EngineScratch> {
    let engines: Vec<_> = SIX
        .iter()
        .map(|p| pool.engine(DeviceId::HOST, p * page_size(), mode).unwrap())
        .collect();
    for _ in 0..3 {
        for e in &engines {
            let mut g = e.claim(e.requirement()).unwrap();
            g.as_mut_slice().unwrap().fill(1);
        }
    }
    engines
}

#[test]
fn shared_mode_holds_the_largest_private_mode_holds_the_sum() {
    let page = page_size();
    let sum: usize = SIX.iter().sum::<usize>() * page;
    let max: usize = SIX.iter().max().unwrap() * page;

    let shared_pool = ScratchPool::new();
    let _shared = run_six(&shared_pool, ScratchMode::Shared);
    let s = shared_pool.stats(DeviceId::HOST).unwrap();
    assert_eq!(s.held_bytes, max);
    assert_eq!(s.shared_requirements, sum);
    assert_eq!(s.reclaimed_bytes(), sum - max);
    // Growth only when a larger engine first ran: 7 -> 18 -> 25 pages.
    assert_eq!(s.growths, 3);
    let os = s.os.unwrap();
    assert_eq!((os.maps, os.unmaps), (3, 2));
    // A growth holds old and new together for a moment: 18 + 25 pages.
    assert_eq!(s.peak_held_bytes, 43 * page);

    let private_pool = ScratchPool::new();
    let private = run_six(&private_pool, ScratchMode::Private);
    let p = private_pool.stats(DeviceId::HOST).unwrap();
    assert_eq!(p.held_bytes, sum);
    assert_eq!((p.growths, p.os.unwrap().maps), (0, 6));
    drop(private);
    assert_eq!(private_pool.stats(DeviceId::HOST).unwrap().held_bytes, 0);

    // Both pools are warm now: further executions make no system call.
    let settled = s.os;
    for e in &_shared {
        drop(e.claim(e.requirement()).unwrap());
    }
    assert_eq!(shared_pool.stats(DeviceId::HOST).unwrap().os, settled);
}

#[test]
fn each_lane_costs_one_more_largest_buffer() {
    let page = page_size();
    let pool = ScratchPool::new();
    let engines: Vec<_> = SIX
        .iter()
        .map(|p| {
            pool.engine(DeviceId::HOST, p * page, ScratchMode::Shared)
                .unwrap()
        })
        .collect();
    for lane in [Lane(1), Lane(2)] {
        for e in &engines {
            drop(e.claim_on(lane, e.requirement()).unwrap());
        }
    }
    let s = pool.stats(DeviceId::HOST).unwrap();
    assert_eq!(s.held_bytes, 2 * 25 * page);
    assert_eq!(pool.trim(), 2 * 25 * page);
    assert_eq!(pool.stats(DeviceId::HOST).unwrap().held_bytes, 0);
}

/// Set only in the child process that `the_environment_variable_reaches_engines`
/// starts; the child then reports the modes it saw instead of passing blindly.
const CHILD_MARK: &str = "WARMARENA_SCRATCH_TEST_CHILD";

#[test]
fn env_child_reports_modes() {
    if std::env::var_os(CHILD_MARK).is_none() {
        return; // Only meaningful inside the child.
    }
    let before = EngineScratch::from_config(page_size()).unwrap();
    // Code that does set a default still gets its way for later engines.
    ScratchPool::global().set_default_mode(ScratchMode::Private);
    let after = EngineScratch::from_config(page_size()).unwrap();
    println!("MODES {:?} {:?}", before.mode(), after.mode());
}

#[test]
#[cfg_attr(miri, ignore)] // Miri cannot start processes
fn the_environment_variable_reaches_engines() {
    let run = |value: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "env_child_reports_modes",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_MARK, "1")
            .env(warmarena::scratch::MODE_ENV_VAR, value)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find_map(|l| l.split_once("MODES ").map(|(_, m)| m.trim().to_owned()))
            .unwrap_or_else(|| panic!("child printed no modes:\n{text}"))
    };
    assert_eq!(run("shared"), "Shared Private");
    assert_eq!(run("private"), "Private Private");
}
