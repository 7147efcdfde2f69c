//! warmarena's planned mode as a report back end: the planner packs a
//! trace's intermediates into one block (offsets reaching the lower bound
//! on real traces); each run takes one execution-arena block of the plan's
//! height and every intermediate is a window at its offset; outputs still
//! come from the I/O arena and leave as leases.

use super::backend::Backend;
use super::replay::Schedule;
use std::cell::{Cell, RefCell};
use warmarena::planner::{plan_intervals, Buffer, PlanOptions};
use warmarena::stats::ArenaStats;
use warmarena::{Allocation, ExecutionArena, IoArena, IoLease};

/// One schedule's plan: the offset of the `k`-th intermediate allocation.
struct Plan {
    offsets: Vec<usize>,
    height: usize,
}

/// A buffer of the planned back end.
pub enum PlannedBuf {
    /// A window into the run's block.
    Window(*mut u8),
    /// An output, in the I/O arena.
    Io(Allocation),
}

/// The planned back end over one or more schedules (shape variants).
pub struct PlannedBackend {
    exec: ExecutionArena,
    io: IoArena,
    plans: Vec<Plan>,
    variant: Cell<usize>,
    cursor: Cell<usize>,
    block: RefCell<Option<Allocation>>,
}

impl PlannedBackend {
    /// Plans every schedule (intermediates only; outputs are I/O buffers).
    pub fn new(schedules: &[&Schedule]) -> Result<PlannedBackend, String> {
        let mut plans = Vec::new();
        for s in schedules {
            let mut bufs = Vec::new();
            for (step, (_, allocs)) in s.steps().iter().enumerate() {
                for &i in allocs {
                    if !s.is_output(i) {
                        let upper = s
                            .steps()
                            .iter()
                            .enumerate()
                            .skip(step + 1)
                            .find(|(_, (frees, _))| frees.contains(&i))
                            .map(|(t, _)| t)
                            .unwrap_or(s.steps().len());
                        bufs.push(Buffer::new(step, upper, s.size(i)));
                    }
                }
            }
            let sol = plan_intervals(&bufs, &PlanOptions::default())
                .map_err(|e| format!("planner: {e:?}"))?;
            plans.push(Plan {
                offsets: sol.placement.offsets,
                height: sol.placement.height,
            });
        }
        Ok(PlannedBackend {
            exec: ExecutionArena::new(),
            io: IoArena::new(),
            plans,
            variant: Cell::new(0),
            cursor: Cell::new(0),
            block: RefCell::new(None),
        })
    }

    /// The plan height of shape variant `v`.
    pub fn height(&self, v: usize) -> usize {
        self.plans.get(v).map_or(0, |p| p.height)
    }
}

impl Backend for PlannedBackend {
    type Buf = PlannedBuf;
    type Out = IoLease;
    fn name(&self) -> &'static str {
        "planned"
    }
    fn begin_run(&self, variant: usize) {
        self.variant.set(variant);
        self.cursor.set(0);
        let h = self.height(variant).max(1);
        *self.block.borrow_mut() = self.exec.allocate(h, 64).ok();
    }
    fn end_run(&self) {
        *self.block.borrow_mut() = None;
    }
    fn alloc(&self, size: usize, output: bool) -> Option<PlannedBuf> {
        if output {
            return self.io.allocate(size, 64).ok().map(PlannedBuf::Io);
        }
        let k = self.cursor.get();
        self.cursor.set(k + 1);
        let off = *self.plans.get(self.variant.get())?.offsets.get(k)?;
        let mut block = self.block.borrow_mut();
        let b = block.as_mut()?;
        if off + size > b.capacity() {
            return None;
        }
        // SAFETY: `off + size` lies within the block (checked above).
        Some(PlannedBuf::Window(unsafe { b.as_mut_ptr().add(off) }))
    }
    fn ptr(buf: &mut PlannedBuf) -> *mut u8 {
        match buf {
            PlannedBuf::Window(p) => *p,
            PlannedBuf::Io(a) => a.as_mut_ptr(),
        }
    }
    fn free(&self, buf: PlannedBuf) {
        drop(buf)
    }
    fn export(&self, buf: PlannedBuf) -> Option<IoLease> {
        match buf {
            PlannedBuf::Io(a) => a.into_lease().ok(),
            PlannedBuf::Window(_) => None,
        }
    }
    fn syscalls(&self) -> Option<u64> {
        Some(self.exec.stats().os.syscalls() + self.io.stats().os.syscalls())
    }
    fn system_bytes(&self) -> Option<u64> {
        Some(self.exec.stats().os.mapped_bytes + self.io.stats().os.mapped_bytes)
    }
    fn copies(&self) -> u64 {
        self.exec.stats().copies + self.io.stats().copies
    }
    fn trim(&self) -> Option<usize> {
        Some(self.exec.trim() + self.io.trim())
    }
    fn arena_stats(&self) -> Option<(ArenaStats, ArenaStats)> {
        Some((self.exec.stats(), self.io.stats()))
    }
}
