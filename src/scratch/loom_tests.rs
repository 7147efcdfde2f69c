//! loom models of the claim / grow / release / trim protocol on the real
//! [`Slot`] (its mutex, condvar and counters come from `scratch::sync`,
//! which is loom's under `cfg(loom)`), over a heap device that checks the
//! two rules of the protocol:
//!
//! - a buffer is never used by two claimants at once;
//! - a buffer being replaced (growth) or trimmed is freed only after its
//!   last user is done.
//!
//! Run: `bash scripts/loom.sh`.

use super::device::{Device, DeviceBuffer, DeviceError, DeviceId};
use super::slot::Slot;
use super::stats::DeviceCounters;
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// Who uses which buffer now, as the claimants report it.
#[derive(Default)]
struct Users {
    /// Address of each buffer a claimant is using.
    using: Vec<usize>,
    freed: usize,
    allocated: usize,
}

struct CheckingDevice {
    users: Arc<Mutex<Users>>,
}

// SAFETY: buffers are distinct zeroed heap blocks of `len` bytes,
// deallocated only in `free`.
unsafe impl Device for CheckingDevice {
    fn id(&self) -> DeviceId {
        DeviceId(7)
    }

    fn allocate(&self, bytes: usize) -> Result<DeviceBuffer, DeviceError> {
        let layout = Layout::from_size_align(bytes, 64).unwrap();
        // SAFETY: `bytes > 0` (the slot never asks for 0).
        let p = core::ptr::NonNull::new(unsafe { alloc_zeroed(layout) }).unwrap();
        self.users.lock().unwrap().allocated += 1;
        Ok(DeviceBuffer::new(p, bytes))
    }

    unsafe fn free(&self, buf: DeviceBuffer) {
        let mut u = self.users.lock().unwrap();
        let addr = buf.ptr().as_ptr() as usize;
        assert!(!u.using.contains(&addr), "a buffer was freed while in use");
        u.freed += 1;
        drop(u);
        let layout = Layout::from_size_align(buf.len(), 64).unwrap();
        // SAFETY: allocated above with this layout, freed once (the slot's contract).
        unsafe { dealloc(buf.ptr().as_ptr(), layout) };
    }

    fn host_accessible(&self) -> bool {
        true
    }
}

/// Claims `bytes` on `slot`, uses the buffer (checking nobody else does),
/// and releases it.
fn claim_and_use(slot: &Slot, dev: &CheckingDevice, dc: &DeviceCounters, bytes: usize) {
    let c = slot.claim(dev, dc, bytes).unwrap();
    assert!(c.capacity >= bytes);
    let addr = c.ptr.as_ptr() as usize;
    {
        let mut u = dev.users.lock().unwrap();
        assert!(u.using.is_empty(), "two claimants hold the slot at once");
        u.using.push(addr);
    }
    // SAFETY: the claim gives this thread the buffer's `capacity` bytes.
    unsafe { c.ptr.as_ptr().add(bytes - 1).write(1) };
    dev.users.lock().unwrap().using.retain(|&a| a != addr);
    slot.release();
}

struct World {
    slot: Slot,
    dev: CheckingDevice,
    dc: DeviceCounters,
}

fn world() -> Arc<World> {
    Arc::new(World {
        slot: Slot::new(true),
        dev: CheckingDevice {
            users: Arc::new(Mutex::new(Users::default())),
        },
        dc: DeviceCounters::default(),
    })
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    crate::sync::loom_model(2, f)
}

#[test]
fn loom_two_claimants_one_growing_never_share_and_the_old_buffer_waits() {
    model(|| {
        let w = world();
        let w2 = Arc::clone(&w);
        let t = thread::spawn(move || claim_and_use(&w2.slot, &w2.dev, &w2.dc, 64));
        // Grows past whatever the other thread allocated.
        claim_and_use(&w.slot, &w.dev, &w.dc, 128);
        t.join().unwrap();
        let freed = w.slot.trim(&w.dev, &w.dc);
        assert!(freed >= 128);
        let u = w.dev.users.lock().unwrap();
        assert_eq!(u.allocated, u.freed, "every buffer freed once");
    });
}

#[test]
fn loom_trim_racing_a_claim_never_frees_the_claimed_buffer() {
    model(|| {
        let w = world();
        // A buffer exists before the race.
        claim_and_use(&w.slot, &w.dev, &w.dc, 64);
        let w2 = Arc::clone(&w);
        let t = thread::spawn(move || claim_and_use(&w2.slot, &w2.dev, &w2.dc, 64));
        w.slot.trim(&w.dev, &w.dc);
        t.join().unwrap();
        w.slot.trim(&w.dev, &w.dc);
        let u = w.dev.users.lock().unwrap();
        assert_eq!(u.allocated, u.freed, "every buffer freed once");
    });
}
