//! A trace turned into per-step event lists, built once before any run so
//! the runs themselves do no bookkeeping allocation.

use super::trace::Trace;

/// Per-step frees and allocations of a trace. Buffers live until the last
/// step are the run's outputs: they are never freed by the run itself.
pub struct Schedule {
    sizes: Vec<usize>,
    outputs: Vec<bool>,
    steps: Vec<(Vec<u32>, Vec<u32>)>,
}

impl Schedule {
    /// Builds the schedule; sizes are multiplied by `batch` (then by `scale`).
    pub fn new(trace: &Trace, batch: usize, scale: f64) -> Schedule {
        let end = trace.buffers.iter().map(|b| b.upper).max().unwrap_or(0);
        let mut steps = vec![(Vec::new(), Vec::new()); end + 1];
        let mut outputs = Vec::with_capacity(trace.buffers.len());
        for (i, b) in trace.buffers.iter().enumerate() {
            steps[b.lower].1.push(i as u32);
            let out = b.upper == end;
            if !out {
                steps[b.upper].0.push(i as u32);
            }
            outputs.push(out);
        }
        Schedule {
            sizes: trace
                .buffers
                .iter()
                .map(|b| (((b.size * batch.max(1)) as f64 * scale) as usize).max(1))
                .collect(),
            outputs,
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

    /// Buffer `i`'s size in bytes.
    pub fn size(&self, i: u32) -> usize {
        self.sizes[i as usize]
    }

    /// Whether buffer `i` leaves the run.
    pub fn is_output(&self, i: u32) -> bool {
        self.outputs[i as usize]
    }

    /// Each step's frees, then allocations.
    pub fn steps(&self) -> &[(Vec<u32>, Vec<u32>)] {
        &self.steps
    }

    /// Total bytes allocated by one run.
    pub fn total_bytes(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// The largest total size live at one step.
    pub fn concurrent_peak(&self) -> usize {
        let (mut live, mut peak) = (0usize, 0usize);
        for (frees, allocs) in &self.steps {
            for &i in frees {
                live -= self.sizes[i as usize];
            }
            for &i in allocs {
                live += self.sizes[i as usize];
            }
            peak = peak.max(live);
        }
        peak
    }
}
