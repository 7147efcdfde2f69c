//! The report's workloads, runnable on any back end with the same kernels:
//! the example network (warmarena runs it through the session router; the
//! peers through the same kernels with their own buffers) and replayed
//! traces (allocate at `lower`, free at `upper`, write every byte).

use super::backend::Backend;
use super::replay::Schedule;
use warmarena::session::ArenaRun;
use warmarena_net::{kernels, nodes::*, Net};

/// Views `len` bytes of a buffer as floats.
///
/// # Safety
/// `p` must point to at least `len` writable bytes, 4-byte aligned, not
/// aliased for the returned lifetime.
unsafe fn floats<'a>(p: *mut u8, len: usize) -> &'a mut [f32] {
    // SAFETY: forwarded from the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(p as *mut f32, len / 4) }
}

/// One run of `net` on a peer back end: the same node order, sizes,
/// lifetimes and kernels as the session path, with the back end's buffers.
/// Returns the exported outputs (features, logits).
pub fn run_net_on<B: Backend>(b: &B, net: &Net, image: &[f32]) -> Option<Vec<B::Out>> {
    let cfg = net.config;
    let bufs = cfg.buffers();
    let size = |node: usize, what: &str| {
        bufs.iter()
            .find(|(n, w, _)| *n == node && *w == what)
            .map(|x| x.2)
            .unwrap_or(0)
    };
    let (c, h, w) = (cfg.channels, cfg.size, cfg.size);
    let act = size(CONV1, "c1");
    let n = act / 4;
    let weights = net.weights();
    // SAFETY (for every `floats` below): each buffer was just allocated with
    // at least the viewed length, 64-byte aligned, and is viewed once at a time.
    let mut c1 = b.alloc(act, false)?;
    let mut ws = b.alloc(size(CONV1, "workspace"), false)?;
    unsafe {
        kernels::conv3x3(
            image,
            cfg.in_channels,
            h,
            w,
            weights.w1,
            weights.b1,
            c,
            floats(B::ptr(&mut c1), act),
            floats(B::ptr(&mut ws), size(CONV1, "workspace")),
        );
    }
    b.free(ws);
    let mut r1 = b.alloc(act, false)?;
    unsafe {
        kernels::relu(
            &floats(B::ptr(&mut c1), act)[..n],
            floats(B::ptr(&mut r1), act),
        )
    };
    b.free(c1);
    let mut c2 = b.alloc(act, false)?;
    let mut ws = b.alloc(size(CONV2, "workspace"), false)?;
    unsafe {
        kernels::conv3x3(
            floats(B::ptr(&mut r1), act),
            c,
            h,
            w,
            weights.w2,
            weights.b2,
            c,
            floats(B::ptr(&mut c2), act),
            floats(B::ptr(&mut ws), size(CONV2, "workspace")),
        );
    }
    b.free(ws);
    let mut r2 = b.alloc(act, false)?;
    unsafe { kernels::relu(floats(B::ptr(&mut c2), act), floats(B::ptr(&mut r2), act)) };
    b.free(c2);
    let mut sum = b.alloc(act, false)?;
    unsafe {
        kernels::add(
            floats(B::ptr(&mut r1), act),
            floats(B::ptr(&mut r2), act),
            floats(B::ptr(&mut sum), act),
        )
    };
    b.free(r1);
    b.free(r2);
    let fb = size(HEAD, "features");
    let pb = size(HEAD, "pooled");
    let mut features = b.alloc(fb, true)?;
    let mut pooled = b.alloc(pb, false)?;
    let mut ws = b.alloc(size(HEAD, "workspace"), false)?;
    unsafe {
        kernels::head(
            floats(B::ptr(&mut sum), act),
            c,
            h,
            w,
            floats(B::ptr(&mut features), fb),
            floats(B::ptr(&mut pooled), pb),
            floats(B::ptr(&mut ws), w * 4),
        );
    }
    b.free(ws);
    b.free(sum);
    let lb = size(FC, "logits");
    let mut logits = b.alloc(lb, true)?;
    unsafe {
        kernels::matmul(
            floats(B::ptr(&mut pooled), pb),
            weights.wfc,
            1,
            pb / 4,
            cfg.classes,
            floats(B::ptr(&mut logits), lb),
        )
    };
    b.free(pooled);
    Some(vec![b.export(features)?, b.export(logits)?])
}

/// One run of `net` through the session router (warmarena's own path).
pub fn run_net_session<'i>(
    net: &Net,
    ctx: &mut ArenaRun<'_, 'i>,
    image: &'i [f32],
) -> Option<Vec<warmarena::IoLease>> {
    ctx.clear();
    let out = net.run(ctx, image).ok()?;
    Some(vec![out.features, out.logits])
}

/// Buffers of a run that stay alive until the trace's last step are the
/// run's outputs (they leave the run).
pub struct TraceRun {
    /// The trace as per-step events.
    pub schedule: Schedule,
}

impl TraceRun {
    /// One replay on `b`: frees then allocations at each step, every byte
    /// written; buffers still live at the end are exported.
    pub fn run<B: Backend>(
        &self,
        b: &B,
        variant: usize,
        slots: &mut Vec<Option<B::Buf>>,
        fill: u8,
    ) -> Option<Vec<B::Out>> {
        let s = &self.schedule;
        slots.resize_with(s.len(), || None);
        b.begin_run(variant);
        for (frees, allocs) in s.steps() {
            for &i in frees {
                if let Some(buf) = slots[i as usize].take() {
                    b.free(buf);
                }
            }
            for &i in allocs {
                let size = s.size(i);
                let mut buf = b.alloc(size, s.is_output(i))?;
                // SAFETY: the buffer holds `size` writable bytes.
                unsafe { B::ptr(&mut buf).write_bytes(fill, size) };
                slots[i as usize] = Some(buf);
            }
        }
        let mut outs = Vec::new();
        for slot in slots.iter_mut() {
            if let Some(buf) = slot.take() {
                outs.push(b.export(buf)?);
            }
        }
        b.end_run();
        Some(outs)
    }
}
