//! Allocation traces: buffers with a half-open live range of steps and a
//! size, read from MiniMalloc's CSV (`id,lower,upper,size[,offset]`) or made
//! up to look like a model's activations.

/// One buffer of a trace: allocated at step `lower`, freed at step `upper`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceBuffer {
    /// First step the buffer is live.
    pub lower: usize,
    /// First step it is dead again (half-open).
    pub upper: usize,
    /// Bytes.
    pub size: usize,
}

/// A whole trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Buffers in file order.
    pub buffers: Vec<TraceBuffer>,
}

impl Trace {
    /// Reads MiniMalloc's CSV format. The header line is required; an
    /// `offset` column, if present, is ignored.
    ///
    /// ```
    /// let t = warmarena_cli::trace::Trace::from_csv("id,lower,upper,size\n0,0,2,64\n1,1,3,32\n").unwrap();
    /// assert_eq!(t.buffers.len(), 2);
    /// assert_eq!(t.concurrent_peak(), 96);
    /// ```
    pub fn from_csv(text: &str) -> Result<Trace, String> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, header) = lines.next().ok_or("empty trace")?;
        let cols: Vec<&str> = header.split(',').map(str::trim).collect();
        let find = |name: &str| {
            cols.iter()
                .position(|c| *c == name)
                .ok_or(format!("header has no `{name}` column"))
        };
        let (lo, up, sz) = (find("lower")?, find("upper")?, find("size")?);
        let mut buffers = Vec::new();
        for (n, line) in lines {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let num = |i: usize| -> Result<usize, String> {
                f.get(i)
                    .ok_or(format!("line {}: missing field {}", n + 1, i + 1))?
                    .parse::<usize>()
                    .map_err(|e| format!("line {}: {e}", n + 1))
            };
            let b = TraceBuffer {
                lower: num(lo)?,
                upper: num(up)?,
                size: num(sz)?,
            };
            if b.upper <= b.lower {
                return Err(format!("line {}: empty live range", n + 1));
            }
            buffers.push(b);
        }
        Ok(Trace { buffers })
    }

    /// The largest total size live at one step: no plan or allocator can
    /// hold the trace in less.
    ///
    /// ```
    /// use warmarena_cli::trace::{Trace, TraceBuffer};
    /// let t = Trace { buffers: vec![TraceBuffer { lower: 0, upper: 1, size: 5 }, TraceBuffer { lower: 1, upper: 2, size: 7 }] };
    /// assert_eq!(t.concurrent_peak(), 7);
    /// ```
    pub fn concurrent_peak(&self) -> usize {
        let mut events: Vec<(usize, i64)> = Vec::with_capacity(self.buffers.len() * 2);
        for b in &self.buffers {
            events.push((b.lower, b.size as i64));
            events.push((b.upper, -(b.size as i64)));
        }
        // Frees at a step happen before allocations at that step.
        events.sort_unstable_by_key(|&(t, d)| (t, d > 0));
        let (mut live, mut peak) = (0i64, 0i64);
        for (_, d) in events {
            live += d;
            peak = peak.max(live);
        }
        peak as usize
    }

    /// Total bytes allocated (and written) by one run.
    pub fn total_bytes(&self) -> usize {
        self.buffers.iter().map(|b| b.size).sum()
    }

    /// A trace shaped like a convolutional network's activations: `layers`
    /// stages whose tensors shrink spatially while channels grow, with
    /// residual branches that keep an input alive across a block and
    /// workspaces that live for one step. Sizes are multiplied by `scale`.
    ///
    /// ```
    /// let t = warmarena_cli::trace::Trace::synthetic_cnn(1.0);
    /// assert!(t.total_bytes() > 400 << 20);
    /// ```
    pub fn synthetic_cnn(scale: f64) -> Trace {
        let mut buffers = Vec::new();
        let mut step = 0usize;
        // (spatial, channels, blocks) per stage, batch 8, f32.
        let stages = [
            (112usize, 64usize, 2usize),
            (56, 256, 3),
            (28, 512, 4),
            (14, 1024, 6),
            (7, 2048, 3),
        ];
        let bytes = |hw: usize, c: usize| ((8 * hw * hw * c * 4) as f64 * scale).max(64.0) as usize;
        let mut prev_out = bytes(224, 3);
        for &(hw, c, blocks) in &stages {
            for _ in 0..blocks {
                let block_in = step;
                // three convs inside the block, each output consumed by the next
                let mut cur = step;
                for k in 0..3 {
                    let ch = if k == 2 { c } else { c / 4 };
                    let size = bytes(hw, ch);
                    // workspace for the conv (im2col-like), one step
                    buffers.push(TraceBuffer {
                        lower: cur,
                        upper: cur + 1,
                        size: size / 2 + 4096,
                    });
                    buffers.push(TraceBuffer {
                        lower: cur,
                        upper: cur + 2,
                        size,
                    });
                    cur += 1;
                }
                // residual add: the block input lives until the add
                buffers.push(TraceBuffer {
                    lower: block_in.saturating_sub(1),
                    upper: cur + 1,
                    size: prev_out,
                });
                prev_out = bytes(hw, c);
                buffers.push(TraceBuffer {
                    lower: cur,
                    upper: cur + 2,
                    size: prev_out,
                });
                step = cur + 1;
            }
        }
        // classifier head and a small output
        buffers.push(TraceBuffer {
            lower: step,
            upper: step + 2,
            size: bytes(1, 2048),
        });
        buffers.push(TraceBuffer {
            lower: step + 1,
            upper: step + 3,
            size: (8 * 1000 * 4),
        });
        Trace { buffers }
    }
}

impl Trace {
    /// A trace shaped like a transformer encoder's activations at batch 8,
    /// sequence 256, hidden 768, 12 heads, 4 layers: per layer the Q/K/V
    /// projections, the attention scores and their softmax (the largest
    /// tensors), the context, the output projection and residual, the MLP's
    /// 4× expansion and its activation, and the second residual; the output
    /// is a small pooled vector. Sizes are multiplied by `scale`; at 1.0 a
    /// run writes about 582 MiB (per layer 8 hidden tensors of 6 MiB, two
    /// score tensors and two MLP tensors of 24 MiB each: 144 MiB; then the
    /// last hidden tensor and the pooled output), with a live peak of 60 MiB.
    ///
    /// ```
    /// let t = warmarena_cli::trace::Trace::synthetic_transformer(1.0);
    /// assert_eq!(t.total_bytes() >> 20, 582);
    /// assert_eq!(t.concurrent_peak() >> 20, 60);
    /// ```
    pub fn synthetic_transformer(scale: f64) -> Trace {
        let (b, s, h, heads, layers) = (8usize, 256usize, 768usize, 12usize, 4usize);
        let sz = |n: usize| ((n * 4) as f64 * scale).max(64.0) as usize;
        let hidden = sz(b * s * h);
        let scores = sz(b * heads * s * s);
        let mlp = sz(b * s * 4 * h);
        let mut buffers = Vec::new();
        let mut t = 0usize;
        let mut push = |lower: usize, upper: usize, size: usize| {
            buffers.push(TraceBuffer { lower, upper, size })
        };
        // the embedded input, live until the first residual
        let mut x_born = t;
        t += 1;
        for _ in 0..layers {
            let (q, k, v) = (t, t + 1, t + 2);
            let sc = t + 3; // scores = q·kᵀ
            let sm = t + 4; // softmax
            let ctx = t + 5; // context = softmax·v
            let proj = t + 6;
            let res1 = t + 7; // x + proj
            let up = t + 8;
            let act = t + 9;
            let down = t + 10;
            let res2 = t + 11; // res1 + down
            push(q, sc + 1, hidden);
            push(k, sc + 1, hidden);
            push(v, ctx + 1, hidden);
            push(sc, sm + 1, scores);
            push(sm, ctx + 1, scores);
            push(ctx, proj + 1, hidden);
            push(proj, res1 + 1, hidden);
            push(x_born, res1 + 1, hidden); // the layer input, kept for the residual
            push(res1, res2 + 1, hidden);
            push(up, act + 1, mlp);
            push(act, down + 1, mlp);
            push(down, res2 + 1, hidden);
            x_born = res2;
            t += 12;
        }
        push(x_born, t + 1, hidden);
        // pooled output: small, live to the end
        push(t, t + 2, sz(b * h));
        Trace { buffers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_errors_are_typed_messages() {
        assert!(Trace::from_csv("").is_err());
        assert!(Trace::from_csv("id,lower,size\n").is_err());
        assert!(Trace::from_csv("id,lower,upper,size\n0,1,x,3\n").is_err());
        assert!(Trace::from_csv("id,lower,upper,size\n0,3,3,3\n").is_err());
        assert!(Trace::from_csv("id,lower,upper,size\n0,3\n").is_err());
        let t = Trace::from_csv("id,lower,upper,size,offset\n0,0,5,10,0\n").unwrap();
        assert_eq!(
            t.buffers[0],
            TraceBuffer {
                lower: 0,
                upper: 5,
                size: 10
            }
        );
    }

    #[test]
    fn synthetic_trace_is_well_formed() {
        let t = Trace::synthetic_cnn(1.0);
        assert!(t.buffers.iter().all(|b| b.upper > b.lower && b.size > 0));
        assert!(t.concurrent_peak() < t.total_bytes());
    }
}
