//! Unit tests, one per rule of the module docs.

use super::device::testing::FailingDevice;
use super::*;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// A liveness bound for tests that would otherwise hang on a bug; it never
/// decides a pass on a healthy run.
const HANG: Duration = Duration::from_secs(20);

fn page() -> usize {
    crate::os::page_size()
}

fn host_stats(pool: &ScratchPool) -> DeviceScratchStats {
    pool.stats(DeviceId::HOST).unwrap()
}

#[test]
fn the_mode_in_force_at_creation_is_captured_for_life() {
    let pool = ScratchPool::with_env_var("WARMARENA_SCRATCH_TEST_CAPTURE_UNSET");
    pool.set_default_mode(ScratchMode::Shared);
    let shared = pool.engine_from_config(DeviceId::HOST, page()).unwrap();
    pool.set_default_mode(ScratchMode::Private);
    let private = pool.engine_from_config(DeviceId::HOST, page()).unwrap();
    assert_eq!(shared.mode(), ScratchMode::Shared);
    assert_eq!(private.mode(), ScratchMode::Private);

    // The change of default did not move the first engine, and both run.
    drop(shared.claim(page()).unwrap());
    drop(private.claim(page()).unwrap());
    let s = host_stats(&pool);
    assert_eq!((s.shared_engines, s.private_engines), (1, 1));
    assert_eq!((s.shared_bytes, s.private_bytes), (page(), page()));
    assert_eq!(s.lanes[0].claims, 1, "only the shared engine used the lane");
}

#[test]
fn the_environment_turns_shared_mode_on_at_creation() {
    // A name of our own, so no other test reads it.
    const VAR: &str = "WARMARENA_SCRATCH_UNIT_TEST_ENV";
    let pool = ScratchPool::with_env_var(VAR);
    std::env::remove_var(VAR);
    assert_eq!(pool.default_mode().unwrap(), ScratchMode::Private);

    std::env::set_var(VAR, "shared");
    let a = pool.engine_from_config(DeviceId::HOST, page()).unwrap();
    std::env::set_var(VAR, "PRIVATE");
    let b = pool.engine_from_config(DeviceId::HOST, page()).unwrap();
    assert_eq!(
        (a.mode(), b.mode()),
        (ScratchMode::Shared, ScratchMode::Private)
    );

    std::env::set_var(VAR, "sharde");
    assert_eq!(
        pool.engine_from_config(DeviceId::HOST, page()).unwrap_err(),
        ScratchError::BadModeSetting
    );
    // A default set in code wins over the environment.
    pool.set_default_mode(ScratchMode::Shared);
    assert_eq!(pool.default_mode().unwrap(), ScratchMode::Shared);
    std::env::remove_var(VAR);
}

#[test]
fn an_engine_needing_no_scratch_gets_no_buffer_and_never_claims() {
    let pool = ScratchPool::new();
    for mode in [ScratchMode::Shared, ScratchMode::Private] {
        let e = pool.engine(DeviceId::HOST, 0, mode).unwrap();
        let mut g = e.claim(0).unwrap();
        assert!(g.is_empty());
        assert_eq!(g.as_mut_slice().unwrap().len(), 0);
        drop(g);
        assert!(e.claim_on(Lane(9), 0).unwrap().is_empty());
        assert_eq!(
            e.claim(1).unwrap_err(),
            ScratchError::ExceedsRequirement {
                requested: 1,
                requirement: 0
            }
        );
    }
    let s = host_stats(&pool);
    assert_eq!((s.claims, s.held_bytes), (0, 0));
    assert_eq!(s.os.unwrap().syscalls(), 0);
    assert_eq!(s.lanes.len(), 1, "lane 9 was never created");
}

#[test]
fn a_zero_request_from_an_engine_that_needs_scratch_is_an_error() {
    let pool = ScratchPool::new();
    for mode in [ScratchMode::Shared, ScratchMode::Private] {
        let e = pool.engine(DeviceId::HOST, 2 * page(), mode).unwrap();
        drop(e.claim(2 * page()).unwrap());
        let claims = host_stats(&pool).claims;
        assert_eq!(
            e.claim(0).unwrap_err(),
            ScratchError::ZeroRequest {
                requirement: 2 * page()
            }
        );
        assert_eq!(
            e.claim_on(Lane(3), 0).unwrap_err(),
            ScratchError::ZeroRequest {
                requirement: 2 * page()
            }
        );
        assert_eq!(host_stats(&pool).claims, claims, "nothing was claimed");
    }
}

#[test]
fn a_request_above_the_recorded_requirement_is_an_error() {
    let e = ScratchPool::new()
        .engine(DeviceId::HOST, 100, ScratchMode::Shared)
        .unwrap();
    assert_eq!(
        e.claim(101).unwrap_err(),
        ScratchError::ExceedsRequirement {
            requested: 101,
            requirement: 100
        }
    );
}

#[test]
fn a_failed_growth_keeps_the_old_buffer_serving() {
    let pool = ScratchPool::new();
    let dev = FailingDevice::new(1);
    dev.fail_above.store(5000, SeqCst);
    pool.register(dev).unwrap();
    let small = pool.engine(DeviceId(1), 1000, ScratchMode::Shared).unwrap();
    let large = pool
        .engine(DeviceId(1), 10_000, ScratchMode::Shared)
        .unwrap();

    let mut g = small.claim(1000).unwrap();
    let first = g.as_ptr();
    g.as_mut_slice().unwrap().fill(0x5A);
    drop(g);

    assert!(matches!(
        large.claim(10_000).unwrap_err(),
        ScratchError::Device(DeviceError::OutOfMemory {
            requested: 10_000,
            ..
        })
    ));
    let s = pool.stats(DeviceId(1)).unwrap();
    assert_eq!((s.failed_growths, s.growths, s.held_bytes), (1, 1, 1000));

    // Not released by the failure: the same buffer, its bytes intact, and
    // the claim is free again (this would hang if the failure kept it).
    let g = small.claim(1000).unwrap();
    assert_eq!(g.as_ptr(), first);
    assert!(g.as_slice().unwrap().iter().all(|&b| b == 0x5A));
    drop(g);
    let g = large.claim(1000).unwrap();
    assert_eq!(
        g.as_ptr(),
        first,
        "a smaller request from the large engine fits"
    );
}

#[test]
fn growth_allocates_the_new_buffer_before_freeing_the_old() {
    let pool = ScratchPool::new();
    let a = pool
        .engine(DeviceId::HOST, page(), ScratchMode::Shared)
        .unwrap();
    let b = pool
        .engine(DeviceId::HOST, 3 * page(), ScratchMode::Shared)
        .unwrap();
    drop(a.claim(page()).unwrap());
    drop(b.claim(3 * page()).unwrap());
    let s = host_stats(&pool);
    assert_eq!(s.held_bytes, 3 * page());
    assert_eq!(s.peak_held_bytes, 4 * page(), "old and new were both held");
    assert_eq!(s.growths, 2);
    let os = s.os.unwrap();
    assert_eq!((os.maps, os.unmaps), (2, 1));
    assert_eq!(os.unmapped_bytes, page() as u64);
    // Settled: more executions make no system call.
    for _ in 0..10 {
        drop(a.claim(page()).unwrap());
        drop(b.claim(2 * page()).unwrap());
    }
    assert_eq!(host_stats(&pool).os.unwrap(), os);
}

#[test]
fn a_failed_idle_wait_leaks_the_old_buffer_instead_of_freeing_it() {
    let pool = ScratchPool::new();
    let dev = Arc::new(FailingDevice::new(4));
    dev.fail_wait.store(true, SeqCst);
    pool.register(SharedDev(Arc::clone(&dev))).unwrap();
    let a = pool.engine(DeviceId(4), 64, ScratchMode::Shared).unwrap();
    let b = pool.engine(DeviceId(4), 128, ScratchMode::Shared).unwrap();
    let first = a.claim(64).unwrap().as_ptr();
    drop(b.claim(128).unwrap());
    assert_eq!(dev.frees.load(SeqCst), 0);
    let s = pool.stats(DeviceId(4)).unwrap();
    assert_eq!((s.leaked_bytes, s.held_bytes), (64, 128));
    dev.fail_wait.store(false, SeqCst);
    assert_eq!(pool.trim(), 128);
    assert_eq!(dev.frees.load(SeqCst), 1);
    // Give the deliberately leaked buffer back so Miri's leak check passes.
    // SAFETY: `first` is the 64-byte buffer the growth leaked; nothing
    // holds it and it was never freed.
    unsafe { dev.free(DeviceBuffer::new(first, 64)) };
}

/// Lets a test keep a handle on a registered [`FailingDevice`].
struct SharedDev(Arc<FailingDevice>);

// SAFETY: forwards every call to a `FailingDevice`, whose contract holds.
unsafe impl Device for SharedDev {
    fn id(&self) -> DeviceId {
        self.0.id()
    }
    fn allocate(&self, bytes: usize) -> Result<DeviceBuffer, DeviceError> {
        self.0.allocate(bytes)
    }
    unsafe fn free(&self, buf: DeviceBuffer) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.0.free(buf) }
    }
    fn wait_idle(&self, buf: &DeviceBuffer) -> Result<(), DeviceError> {
        self.0.wait_idle(buf)
    }
    fn host_accessible(&self) -> bool {
        true
    }
}

#[test]
fn a_growth_on_one_device_does_not_block_claims_elsewhere() {
    let pool = Arc::new(ScratchPool::new());
    let dev0 = FailingDevice::new(10);
    let (entered_tx, entered) = mpsc::channel();
    let (open, open_rx) = mpsc::channel();
    *dev0.gate.lock().unwrap() = Some((entered_tx, open_rx));
    pool.register(dev0).unwrap();
    pool.register(FailingDevice::new(11)).unwrap();
    let on0 = pool
        .engine(DeviceId(10), 4096, ScratchMode::Shared)
        .unwrap();
    let on1 = pool
        .engine(DeviceId(11), 4096, ScratchMode::Shared)
        .unwrap();

    std::thread::scope(|s| {
        // Owned here, so a failed expectation drops it and frees the grower.
        let open = open;
        // Device 10's first claim grows its buffer and stalls in allocate.
        let grower = s.spawn(|| drop(on0.claim(4096).unwrap()));
        entered
            .recv_timeout(HANG)
            .expect("growth reached the device");

        // Meanwhile: a claim on device 11, a claim on another lane of
        // device 10, a new engine on device 10, and the stats all proceed.
        let (done_tx, done) = mpsc::channel();
        let pool2 = Arc::clone(&pool);
        let on0 = &on0;
        let on1 = &on1;
        s.spawn(move || {
            drop(on1.claim(4096).unwrap());
            drop(on0.claim_on(Lane(2), 4096).unwrap());
            let fresh = pool2.engine(DeviceId(10), 64, ScratchMode::Shared).unwrap();
            drop(fresh.claim_on(Lane(3), 64).unwrap());
            let _ = pool2.stats(DeviceId(10)).unwrap();
            done_tx.send(()).unwrap();
        });
        done.recv_timeout(HANG)
            .expect("claims elsewhere finished while device 10 was growing");
        open.send(()).unwrap();
        grower.join().unwrap();
    });
    assert_eq!(pool.stats(DeviceId(10)).unwrap().growths, 3);
    assert_eq!(pool.stats(DeviceId(11)).unwrap().growths, 1);
}

#[test]
fn a_second_claimant_of_a_buffer_waits_for_the_guard_to_drop() {
    let pool = ScratchPool::new();
    let a = pool
        .engine(DeviceId::HOST, page(), ScratchMode::Shared)
        .unwrap();
    let b = pool
        .engine(DeviceId::HOST, page(), ScratchMode::Shared)
        .unwrap();
    let entry = pool.entry(DeviceId::HOST).unwrap();

    let mut held = a.claim(page()).unwrap();
    held.as_mut_slice().unwrap().fill(1);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut g = b.claim(page()).unwrap();
            // The holder finished writing before we got here.
            assert!(g.as_slice().unwrap().iter().all(|&x| x == 1));
            g.as_mut_slice().unwrap().fill(2);
        });
        // Until the waiter is parked on the claim, keep holding.
        while entry.default_lane.waiters() == 0 {
            assert!(!waiter.is_finished(), "the second claimant did not wait");
            std::thread::yield_now();
        }
        // Other lanes are not held up meanwhile.
        drop(b.claim_on(Lane(8), page()).unwrap());
        drop(held);
        waiter.join().unwrap();
    });
    let s = host_stats(&pool);
    assert_eq!(s.lanes[0].contended_claims, 1);
    assert_eq!(s.contended_claims, 1);
    assert!(
        s.wait_ns > 0 && s.wait_ns == s.lanes[0].wait_ns,
        "the wait was timed"
    );
}

#[test]
fn trim_frees_idle_shared_buffers_only() {
    let pool = ScratchPool::new();
    let shared = pool
        .engine(DeviceId::HOST, page(), ScratchMode::Shared)
        .unwrap();
    let private = pool
        .engine(DeviceId::HOST, page(), ScratchMode::Private)
        .unwrap();
    drop(shared.claim_on(Lane(1), page()).unwrap());
    let busy = shared.claim(page()).unwrap();
    assert_eq!(pool.trim(), page(), "lane 1 freed, the claimed lane 0 kept");
    drop(busy);
    assert_eq!(pool.trim(), page());
    let s = host_stats(&pool);
    assert_eq!((s.shared_bytes, s.private_bytes), (0, page()));
    assert_eq!((s.trims, s.trimmed_bytes), (2, 2 * page()));
    // A trimmed lane allocates again on its next claim.
    drop(shared.claim(page()).unwrap());
    assert_eq!(host_stats(&pool).shared_bytes, page());
    drop(private);
    assert_eq!(host_stats(&pool).private_bytes, 0);
}

#[test]
fn a_private_engine_holds_its_own_buffer_for_life() {
    let pool = ScratchPool::new();
    let e = pool
        .engine(DeviceId::HOST, 2 * page(), ScratchMode::Private)
        .unwrap();
    let first = e.claim(page()).unwrap().as_ptr();
    // Lanes do not split a private engine's buffer.
    assert_eq!(e.claim_on(Lane(5), 2 * page()).unwrap().as_ptr(), first);
    let s = host_stats(&pool);
    assert_eq!((s.private_bytes, s.growths, s.claims), (2 * page(), 0, 2));
    assert_eq!(s.lanes.len(), 1);
    drop(e);
    let s = host_stats(&pool);
    assert_eq!((s.held_bytes, s.private_engines), (0, 0));
    assert_eq!(s.os.unwrap().unmaps, 1);
}

#[test]
fn lanes_get_separate_buffers_and_their_own_figures() {
    let pool = ScratchPool::new();
    let e = pool
        .engine(DeviceId::HOST, 2 * page(), ScratchMode::Shared)
        .unwrap();
    let g1 = e.claim_on(Lane(1), page()).unwrap();
    let g2 = e.claim_on(Lane(2), 2 * page()).unwrap();
    assert_ne!(g1.as_ptr(), g2.as_ptr());
    drop((g1, g2));
    let s = host_stats(&pool);
    assert_eq!(s.shared_bytes, 3 * page());
    let lanes: Vec<_> = s.lanes.iter().map(|l| (l.lane, l.capacity)).collect();
    assert_eq!(
        lanes,
        [(Lane(0), 0), (Lane(1), page()), (Lane(2), 2 * page())]
    );
}

#[test]
fn unknown_and_duplicate_devices_are_errors() {
    let pool = ScratchPool::new();
    assert_eq!(
        pool.engine(DeviceId(7), 1, ScratchMode::Shared)
            .unwrap_err(),
        ScratchError::UnknownDevice(DeviceId(7))
    );
    pool.register(FailingDevice::new(7)).unwrap();
    assert_eq!(
        pool.register(FailingDevice::new(7)).unwrap_err(),
        ScratchError::AlreadyRegistered(DeviceId(7))
    );
    assert!(pool.engine(DeviceId(7), 1, ScratchMode::Shared).is_ok());
}

#[test]
fn a_refused_private_allocation_creates_no_engine() {
    let pool = ScratchPool::new();
    let dev = FailingDevice::new(2);
    dev.fail_above.store(10, SeqCst);
    pool.register(dev).unwrap();
    assert!(matches!(
        pool.engine(DeviceId(2), 11, ScratchMode::Private),
        Err(ScratchError::Device(_))
    ));
    let s = pool.stats(DeviceId(2)).unwrap();
    assert_eq!((s.private_engines, s.held_bytes), (0, 0));
}

#[test]
fn dropping_a_pool_frees_its_lane_buffers() {
    let dev = Arc::new(FailingDevice::new(5));
    let pool = ScratchPool::new();
    pool.register(SharedDev(Arc::clone(&dev))).unwrap();
    let e = pool.engine(DeviceId(5), 256, ScratchMode::Shared).unwrap();
    drop(e.claim(256).unwrap());
    drop(e.claim_on(Lane(1), 256).unwrap());
    drop(e);
    assert_eq!(
        dev.frees.load(SeqCst),
        0,
        "a pool keeps its buffers while it lives"
    );
    drop(pool);
    assert_eq!(dev.frees.load(SeqCst), 2);
}

#[test]
fn a_guard_can_end_its_claim_on_another_thread() {
    let pool = ScratchPool::new();
    let e = pool
        .engine(DeviceId::HOST, page(), ScratchMode::Shared)
        .unwrap();
    let mut g = e.claim(page()).unwrap();
    g.as_mut_slice().unwrap().fill(3);
    std::thread::scope(|s| {
        s.spawn(move || {
            assert!(g.as_slice().unwrap().iter().all(|&b| b == 3));
            drop(g);
        });
    });
    // Released over there: claimable here without waiting.
    drop(e.claim(page()).unwrap());
    assert_eq!(host_stats(&pool).contended_claims, 0);
}
