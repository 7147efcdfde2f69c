//! Trace replay through a public allocator interface, shared by the
//! replay test (`tests/replay.rs`) and bench (`benches/replay.rs`): each
//! buffer is allocated at its `lower` step and freed at its `upper` step
//! (frees of a step before its allocations), every byte written, as a user
//! of `allocator_api2` would. Also the trace families the held-out checks
//! use (sizes scaled, perturbed, free order shuffled) and the data folder.
#![allow(dead_code)]

use allocator_api2::alloc::{Allocator, Layout};
use std::path::PathBuf;
use warmarena::planner::{parse_csv, Buffer};

/// A backend a replay can drive: allocate and free by layout.
pub trait Backend {
    /// A buffer for `layout` (non-zero size), or null.
    fn alloc(&self, layout: Layout) -> *mut u8;
    /// Frees what [`Backend::alloc`] returned for `layout`.
    ///
    /// # Safety
    /// `p` came from `alloc(layout)` of this backend and is freed once.
    unsafe fn free(&self, p: *mut u8, layout: Layout);
}

/// Any `allocator_api2` allocator (the arenas, by reference).
pub struct Api2<A>(pub A);

impl<A: Allocator> Backend for Api2<A> {
    fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.0.allocate(layout) {
            Ok(p) => p.cast::<u8>().as_ptr(),
            Err(_) => core::ptr::null_mut(),
        }
    }
    unsafe fn free(&self, p: *mut u8, layout: Layout) {
        if let Some(p) = core::ptr::NonNull::new(p) {
            // SAFETY: forwarded from the caller's contract.
            unsafe { self.0.deallocate(p, layout) }
        }
    }
}

/// A `GlobalAlloc` peer (mimalloc, the system allocator).
pub struct Global<G>(pub G);

impl<G: std::alloc::GlobalAlloc> Backend for Global<G> {
    fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: replays never ask for a zero-size layout.
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn free(&self, p: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.0.dealloc(p, layout) }
    }
}

/// A trace as a flat event list: `i` allocates buffer `i`, `i | FREE`
/// frees it; in step order, frees of a step first.
#[derive(Clone, Debug)]
pub struct Replay {
    pub name: String,
    pub sizes: Vec<usize>,
    events: Vec<u32>,
    /// The largest total of sizes live at once.
    pub live_peak: usize,
}

const FREE: u32 = 1 << 31;

impl Replay {
    /// Builds the replay of `bufs` (sizes times `batch`; zero sizes dropped).
    /// Frees of one step come in the order `free_order` gives them
    /// (a permutation seed; 0 keeps file order).
    pub fn new(name: &str, bufs: &[Buffer], batch: usize, free_order: u64) -> Replay {
        let bufs: Vec<Buffer> = bufs.iter().copied().filter(|b| b.size > 0).collect();
        // (time, is_alloc, tie-break, index): frees (false) sort first.
        let mut ev: Vec<(usize, bool, u64, u32)> = Vec::with_capacity(bufs.len() * 2);
        for (i, b) in bufs.iter().enumerate() {
            ev.push((b.lower, true, i as u64, i as u32));
            let tie = if free_order == 0 {
                i as u64
            } else {
                mix(free_order ^ (i as u64).wrapping_mul(0x9E37_79B9))
            };
            ev.push((b.upper, false, tie, i as u32 | FREE));
        }
        ev.sort_unstable();
        let sizes: Vec<usize> = bufs.iter().map(|b| b.size * batch.max(1)).collect();
        let (mut live, mut peak) = (0usize, 0usize);
        for &(_, _, _, e) in &ev {
            let s = sizes[(e & !FREE) as usize];
            if e & FREE != 0 {
                live -= s;
            } else {
                live += s;
                peak = peak.max(live);
            }
        }
        Replay {
            name: name.to_string(),
            sizes,
            events: ev.into_iter().map(|e| e.3).collect(),
            live_peak: peak,
        }
    }

    /// [`Replay::run`] that reads `probe` after each allocation's write and
    /// reports (buffer, size, address, faults) for every one that faulted.
    pub fn run_probed<B: Backend>(
        &self,
        b: &B,
        align: usize,
        run: u8,
        slots: &mut [*mut u8],
        probe: &mut dyn FnMut() -> u64,
    ) -> Vec<(usize, usize, usize, u64)> {
        let mut out = Vec::new();
        let mut last = probe();
        for &e in &self.events {
            let i = (e & !FREE) as usize;
            let layout = Layout::from_size_align(self.sizes[i], align).unwrap();
            if e & FREE != 0 {
                // SAFETY: slot i holds the live buffer allocated with `layout`.
                unsafe { b.free(slots[i], layout) };
                slots[i] = core::ptr::null_mut();
            } else {
                let p = b.alloc(layout);
                assert!(!p.is_null());
                // SAFETY: the backend handed out `size` writable bytes at `p`.
                unsafe { p.write_bytes(run ^ i as u8, self.sizes[i]) };
                slots[i] = p;
            }
            let now = probe();
            if now != last {
                out.push((i, self.sizes[i], slots[i] as usize, now - last));
            }
            last = now;
        }
        out
    }

    /// Bytes allocated by one run.
    pub fn total_bytes(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// One run: every buffer allocated at `align`, written whole with a
    /// byte derived from `run`, and freed. `slots` must hold one entry per
    /// buffer (allocated by the caller so the run itself does not touch the
    /// heap). Returns `false` when the backend refused a request.
    pub fn run<B: Backend + ?Sized>(
        &self,
        b: &B,
        align: usize,
        run: u8,
        slots: &mut [*mut u8],
    ) -> bool {
        for &e in &self.events {
            let i = (e & !FREE) as usize;
            let layout = match Layout::from_size_align(self.sizes[i], align) {
                Ok(l) => l,
                Err(_) => return false,
            };
            if e & FREE != 0 {
                // SAFETY: slot i holds the live buffer allocated with `layout`.
                unsafe { b.free(slots[i], layout) };
                slots[i] = core::ptr::null_mut();
            } else {
                let p = b.alloc(layout);
                if p.is_null() {
                    return false;
                }
                // SAFETY: the backend handed out `size` writable bytes at `p`.
                unsafe { p.write_bytes(run ^ i as u8, self.sizes[i]) };
                slots[i] = p;
            }
        }
        true
    }

    /// The same trace with every size scaled by `num / den` and, when
    /// `jitter_seed` is non-zero, perturbed by up to ±`jitter_pct` % per
    /// buffer (deterministically).
    pub fn family(
        name: &str,
        bufs: &[Buffer],
        num: usize,
        den: usize,
        jitter_seed: u64,
        jitter_pct: u64,
    ) -> Vec<Buffer> {
        bufs.iter()
            .enumerate()
            .map(|(i, b)| {
                let mut s = b.size * num / den.max(1);
                if jitter_seed != 0 && jitter_pct > 0 {
                    let r = mix(jitter_seed ^ i as u64 ^ name.len() as u64) % (2 * jitter_pct + 1);
                    s = s * (100 + r as usize) / (100 + jitter_pct as usize);
                }
                Buffer::new(b.lower, b.upper, s.max(1))
            })
            .collect()
    }
}

/// A 64-bit mixer (splitmix64's finalizer).
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `$WARMARENA_DATA/planner`, default `../shared/data/planner`; `None`
/// (with the reason printed) when absent.
pub fn planner_data() -> Option<PathBuf> {
    let root = std::env::var_os("WARMARENA_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let dir = root.join("planner");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: {} not found (set WARMARENA_DATA to the data folder)",
            dir.display()
        );
        None
    }
}

/// Every CSV trace under `dir/<family>/`, sorted, as (name, buffers).
pub fn load_traces(dir: &std::path::Path, families: &[&str]) -> Vec<(String, Vec<Buffer>)> {
    let mut out = Vec::new();
    for fam in families {
        let Ok(rd) = std::fs::read_dir(dir.join(fam)) else {
            eprintln!("SKIPPED: no {fam} traces under {}", dir.display());
            continue;
        };
        let mut paths: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "csv"))
            .collect();
        paths.sort();
        for p in paths {
            let text = std::fs::read_to_string(&p).expect("read trace");
            let inst = parse_csv(&text).expect("parse trace");
            let name = format!("{fam}/{}", p.file_name().unwrap().to_string_lossy());
            out.push((name, inst.buffers));
        }
    }
    out
}

/// Bytes of this process's anonymous memory backed by transparent huge
/// pages (`AnonHugePages` of `/proc/self/smaps_rollup`).
pub fn anon_huge_bytes() -> usize {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("AnonHugePages:"))?;
            line.split_whitespace().nth(1)?.parse::<usize>().ok()
        })
        .map(|kib| kib << 10)
        .unwrap_or(0)
}

/// Resident set size of this process in bytes (`/proc/self/statm`).
pub fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}
