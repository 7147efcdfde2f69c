//! Outputs that outlive the run: each run's output is an I/O-arena buffer
//! exported as an [`IoLease`] (no copy), then handed
//!
//! - to a consumer thread over a channel, which reads it and drops it
//!   there (the buffer goes back to its arena from that thread), and
//! - to a DLPack 1.x consumer (NumPy, PyTorch, JAX or a C library) as a
//!   `DLManagedTensorVersioned`, whose deleter returns the lease.
//!
//! While any owner holds a lease the buffer is never reused or trimmed;
//! after the last one lets go, the next run gets it back warm.
//!
//! `cargo run --release --example leases`

use std::sync::mpsc::channel;
use std::thread;
use warmarena::handle::dlpack::{DLDataType, DLManagedTensorVersioned, DLPACK_FLAG_READ_ONLY};
use warmarena::{IoArena, IoLease};

/// Rows and columns of the output tensor (f32).
const SHAPE: [i64; 2] = [64, 256];
const BYTES: usize = 64 * 256 * 4;

/// One run: writes the output tensor (row `r`, column `c` = run + r + c/1000)
/// and exports it.
fn run(io: &IoArena, run: usize) -> IoLease {
    let mut out = io.allocate(BYTES, 64).expect("an output buffer");
    for (i, v) in out.as_mut_slice().chunks_exact_mut(4).enumerate() {
        let (r, c) = (i / 256, i % 256);
        let x = run as f32 + r as f32 + c as f32 / 1000.0;
        v.copy_from_slice(&x.to_ne_bytes());
    }
    // O(1), same address: the lease owns the buffer from here on.
    io.export(out).expect("an I/O allocation exports")
}

/// What a DLPack consumer does with a tensor: read its metadata and data,
/// then call its deleter exactly once.
///
/// # Safety
/// `t` must be a live tensor from `IoLease::into_dlpack`, not yet deleted.
unsafe fn consume_dlpack(t: *mut DLManagedTensorVersioned) -> f32 {
    // SAFETY: `t` is live (the caller's contract); its shape has `ndim`
    // entries and its data holds the shape's elements until the deleter runs.
    unsafe {
        let tensor = &(*t).dl_tensor;
        let shape = std::slice::from_raw_parts(tensor.shape, tensor.ndim as usize);
        assert_eq!(shape, SHAPE);
        assert_eq!(tensor.dtype, DLDataType::F32);
        assert!(tensor.strides.is_null(), "compact row-major");
        let data = std::slice::from_raw_parts(tensor.data as *const f32, BYTES / 4);
        let last = data[data.len() - 1];
        let read_only = (*t).flags & DLPACK_FLAG_READ_ONLY != 0;
        println!(
            "  DLPack consumer: {}x{} f32 at {:p}, {}, last element {last}",
            shape[0],
            shape[1],
            tensor.data,
            if read_only {
                "read-only (another owner holds the lease)"
            } else {
                "writable (it was the only owner)"
            }
        );
        ((*t).deleter.expect("a deleter"))(t);
        last
    }
}

fn main() {
    let io = IoArena::new(); // one per model or session, not per run

    // A consumer thread: receives leases, reads them, drops them there.
    let (send, receive) = channel::<(usize, IoLease)>();
    let consumer = thread::spawn(move || {
        let mut sum = 0.0f64;
        for (run, lease) in receive {
            let first = f32::from_ne_bytes(lease.as_slice()[..4].try_into().unwrap());
            assert_eq!(first, run as f32);
            sum += f64::from(first);
            // Dropped here, on this thread: back to the arena if it was the
            // last owner.
        }
        sum
    });

    for r in 0..4 {
        let lease = run(&io, r);
        println!(
            "run {r}: output at {:p}, {} bytes, owners {}",
            lease.as_ptr(),
            lease.len(),
            lease.owners()
        );
        // A clone is one more owner of the same bytes (one atomic increment).
        let for_consumer = lease.clone();
        assert_eq!(for_consumer.as_ptr(), lease.as_ptr());
        send.send((r, for_consumer)).expect("the consumer is up");

        // The caller's own owner goes to DLPack: the tensor's data is the
        // lease's buffer; the deleter releases this owner.
        let tensor = lease
            .into_dlpack(DLDataType::F32, &SHAPE)
            .expect("the shape fits the buffer");
        // SAFETY: a live tensor just exported, deleted once by the consumer.
        let last = unsafe { consume_dlpack(tensor.as_ptr()) };
        assert_eq!(last, r as f32 + 63.0 + 0.255);
    }
    drop(send);
    let sum = consumer.join().expect("consumer");
    assert_eq!(sum, 0.0 + 1.0 + 2.0 + 3.0);

    // Every owner has let go: nothing is leased, and the buffers stay in
    // the arena for the next runs. (A run while the consumer still held an
    // earlier output took a buffer of its own: how many runs went cold
    // above depends on the consumer thread's timing.)
    let s = io.stats();
    println!(
        "after 4 runs: {} leases, {} live bytes, {} retained bytes; cold allocations {}, warm {}",
        s.leases, s.live_bytes, s.retained_bytes, s.cold_allocations, s.warm_allocations
    );
    assert_eq!((s.leases, s.live_bytes), (0, 0));
    let before = io.stats().cold_allocations;
    drop(run(&io, 4));
    assert_eq!(
        io.stats().cold_allocations,
        before,
        "a run after the owners let go reuses a buffer"
    );
}
