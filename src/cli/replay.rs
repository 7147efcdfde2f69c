//! Replays a trace on a back end as one run, the way kernels would: at each
//! step, free the buffers whose range ended, then allocate the buffers born
//! there and write every byte.

use super::backend::Backend;
use super::trace::Trace;
use crate::faults::FaultCounter;
use std::time::Instant;

/// A trace turned into per-step event lists, built once before any run so
/// the runs themselves do no bookkeeping allocation.
pub struct Schedule {
    sizes: Vec<usize>,
    /// For each step: buffers freed, then buffers allocated.
    steps: Vec<(Vec<u32>, Vec<u32>)>,
}

impl Schedule {
    /// Builds the schedule; sizes are multiplied by `batch`.
    pub fn new(trace: &Trace, batch: usize) -> Schedule {
        let n_steps = trace.buffers.iter().map(|b| b.upper).max().unwrap_or(0) + 1;
        let mut steps = vec![(Vec::new(), Vec::new()); n_steps];
        for (i, b) in trace.buffers.iter().enumerate() {
            steps[b.lower].1.push(i as u32);
            steps[b.upper].0.push(i as u32);
        }
        Schedule {
            sizes: trace
                .buffers
                .iter()
                .map(|b| b.size * batch.max(1))
                .collect(),
            steps,
        }
    }

    /// Buffers in the trace.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether the trace has no buffer.
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
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
}

/// Slots for a run's live buffers, reused across runs.
pub struct Slots<B: Backend>(Vec<Option<B::Buf>>);

impl<B: Backend> Slots<B> {
    /// Room for every buffer of `s`.
    pub fn for_schedule(s: &Schedule) -> Self {
        Slots((0..s.len()).map(|_| None).collect())
    }
}

/// Runs the schedule once on `b`, measuring faults, time and system calls.
/// Returns `None` if the back end refused an allocation.
pub fn run_once<B: Backend>(
    b: &B,
    s: &Schedule,
    slots: &mut Slots<B>,
    faults: &mut FaultCounter,
    fill: u8,
) -> Option<RunCost> {
    let sys0 = b.syscalls();
    faults.reset();
    let t0 = Instant::now();
    for (frees, allocs) in &s.steps {
        for &i in frees {
            if let Some(buf) = slots.0[i as usize].take() {
                b.free(buf);
            }
        }
        for &i in allocs {
            let size = s.sizes[i as usize];
            let mut buf = b.alloc(size)?;
            // SAFETY: the buffer holds `size` writable bytes.
            unsafe { B::ptr(&mut buf).write_bytes(fill, size) };
            slots.0[i as usize] = Some(buf);
        }
    }
    for slot in slots.0.iter_mut() {
        if let Some(buf) = slot.take() {
            b.free(buf);
        }
    }
    let nanos = t0.elapsed().as_nanos() as u64;
    let f = faults.read();
    Some(RunCost {
        minor_faults: f.minor,
        nanos,
        syscalls: match (sys0, b.syscalls()) {
            (Some(a), Some(z)) => Some(z - a),
            _ => None,
        },
    })
}
