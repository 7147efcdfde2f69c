//! The ownership rules of DESIGN.md, each one a test named after it, through
//! the handle layer (allocations, leases, raw and DLPack export).

use crate::support::{check, fill, state};
use allocator_api2::alloc::{Allocator, Layout};
use core::marker::PhantomData;
use std::ptr::NonNull;
use warmarena::handle::dlpack::DLDataType;
use warmarena::handle::ValueMemory;
use warmarena::{Allocation, ArenaConfig, ArenaKind, ExecutionArena, IoArena, IoLease};

/// `Probe::<T>::is_clone()` is true exactly when `T: Clone` (an inherent
/// method wins over the fallback trait method only when its bound holds).
struct Probe<T>(PhantomData<T>);
trait NotClone {
    fn is_clone(&self) -> bool {
        false
    }
}
impl<T> NotClone for Probe<T> {}
impl<T: Clone> Probe<T> {
    #[allow(dead_code)]
    fn is_clone(&self) -> bool {
        true
    }
}

#[test]
fn rule_1_a_buffer_belongs_to_exactly_one_arena() {
    let exec = ExecutionArena::new();
    let io = IoArena::new();
    let other_io = IoArena::new();
    let e = exec.allocate(100_000, 64).unwrap();
    let o = io.allocate(100_000, 64).unwrap();
    assert_eq!(e.kind(), ArenaKind::Execution);
    assert_eq!(o.kind(), ArenaKind::Io);
    let (es, os_) = (e.as_ptr() as usize, o.as_ptr() as usize);
    assert!(es + e.capacity() <= os_ || os_ + o.capacity() <= es);
    // Execution memory cannot become an exported output, and one I/O arena
    // cannot export another's buffer.
    let e = e.into_lease().unwrap_err();
    let o = other_io.export(o).unwrap_err();
    drop(e);
    drop(o);
    assert_eq!(exec.stats().retained_buffers, 1);
    assert_eq!(io.stats().retained_buffers, 1);
    assert_eq!(other_io.stats().retained_buffers, 0);
}

#[test]
fn rule_2_a_live_allocation_has_exactly_one_owner() {
    assert!(!Probe::<Allocation>(PhantomData).is_clone());
    assert!(Probe::<IoLease>(PhantomData).is_clone());
    let io = IoArena::new();
    let a = io.allocate(4096, 64).unwrap();
    let lease = a.into_lease().unwrap(); // the allocation is moved, not copied
    let s = io.stats();
    assert_eq!((s.live_buffers, s.leases, s.leased_bytes), (1, 1, 4096));
    let clones: Vec<IoLease> = (0..5).map(|_| lease.clone()).collect();
    assert_eq!(io.stats().leases, 1, "clones share one owner record");
    drop(clones);
    drop(lease);
    let s = io.stats();
    assert_eq!((s.frees, s.live_buffers, s.leases), (1, 0, 0));
}

#[test]
fn rule_3_a_buffer_is_on_a_free_list_only_after_its_last_owner_released_it() {
    let io = IoArena::new();
    let lease = io.allocate(1 << 20, 64).unwrap().into_lease().unwrap();
    let addr = lease.as_ptr();
    let a = lease.clone();
    let b = lease.clone();
    drop(lease);
    drop(a);
    assert_eq!(io.stats().retained_buffers, 0);
    let fresh = io.allocate(1 << 20, 64).unwrap();
    assert_ne!(fresh.as_ptr(), addr);
    assert!(!fresh.served_warm());
    drop(b);
    assert_eq!(io.stats().retained_buffers, 1);
    drop(fresh);
    assert_eq!(io.stats().retained_buffers, 2);
    let again = io.allocate(1 << 20, 64).unwrap();
    assert!(again.served_warm());
}

#[test]
fn rule_4_clearing_the_run_values_does_not_invalidate_an_exported_output() {
    let exec = ExecutionArena::new();
    let io = IoArena::new();
    let mut values: Vec<ValueMemory<'static>> = Vec::new();
    let mut out = io.allocate(300_000, 64).unwrap();
    fill(out.as_mut_slice(), 42);
    let lease = out.into_lease().unwrap();
    values.push(ValueMemory::Leased(lease.clone()));
    values.push(ValueMemory::Owned(exec.allocate(300_000, 64).unwrap()));
    values.clear();
    exec.trim();
    io.trim();
    // New work of the same shapes writes elsewhere.
    for s in 0..4 {
        let mut x = io.allocate(300_000, 64).unwrap();
        fill(x.as_mut_slice(), s);
    }
    assert!(check(lease.as_slice(), 42));
    assert_eq!(io.stats().leases, 1);
}

#[test]
fn rule_5_a_new_run_never_reuses_storage_pinned_by_an_older_output() {
    let io = IoArena::new();
    let mut held: Vec<(IoLease, u64)> = Vec::new();
    for run in 0..16u64 {
        let mut out = io.allocate(200_000, 64).unwrap();
        for (l, _) in &held {
            let (a, b) = (out.as_ptr() as usize, l.as_ptr() as usize);
            assert!(
                a + out.capacity() <= b || b + l.capacity() <= a,
                "run {run} reused a pinned buffer"
            );
        }
        fill(out.as_mut_slice(), run);
        held.push((out.into_lease().unwrap(), run));
        if held.len() > 8 {
            held.remove(0); // the oldest output's owner lets go
        }
    }
    for (l, run) in &held {
        assert!(check(l.as_slice(), *run), "output of run {run} changed");
    }
    let s = io.stats();
    assert_eq!(s.leases, 8);
    // One fresh buffer per held output, plus one returned and reused.
    assert_eq!(s.cold_allocations, 9);
}

#[test]
fn rule_6_borrowed_memory_never_enters_a_free_list() {
    let io = IoArena::new();
    let exec = ExecutionArena::new();
    let caller = vec![5u8; 1 << 16];
    let before = (state(io.stats()), state(exec.stats()));
    let m = ValueMemory::Borrowed(&caller);
    assert_eq!(m.kind(), None);
    assert_eq!(m.as_ptr(), caller.as_ptr());
    drop(m);
    // A foreign pointer handed to the arena's deallocate is ignored.
    let layout = Layout::from_size_align(1 << 16, 1).unwrap();
    let foreign = NonNull::new(caller.as_ptr() as *mut u8).unwrap();
    // SAFETY: deliberately violating the contract with a caller's slice; the
    // arena must recognise it is not its own and ignore it.
    unsafe { Allocator::deallocate(&io, foreign, layout) };
    assert_eq!((state(io.stats()), state(exec.stats())), before);
    assert_eq!(io.stats().retained_buffers, 0);
    assert!(caller.iter().all(|&b| b == 5));
}

#[test]
fn rule_7_moving_an_allocation_between_owners_moves_no_bytes() {
    let io = IoArena::new();
    let mut a = io.allocate(4096 * 6, 64).unwrap();
    fill(a.as_mut_slice(), 7);
    let addr = a.as_ptr();
    let lease = a.into_lease().unwrap();
    assert_eq!(lease.as_ptr(), addr);
    let raw = lease.into_raw();
    // SAFETY: `raw` came from into_raw; retained then released once from "C".
    unsafe { warmarena::handle::warmarena_lease_retain(raw) };
    // SAFETY: as above, releasing the extra owner.
    unsafe { warmarena::handle::warmarena_lease_release(raw) };
    // SAFETY: `raw` came from into_raw and is taken back once.
    let lease = unsafe { IoLease::from_raw(raw) };
    assert_eq!(lease.as_ptr(), addr);
    let t = lease.into_dlpack(DLDataType::F32, &[6, 1024]).unwrap();
    // SAFETY: a live tensor from into_dlpack; its deleter is called once.
    unsafe {
        assert_eq!((*t.as_ptr()).dl_tensor.data as *const u8, addr);
        ((*t.as_ptr()).deleter.unwrap())(t.as_ptr());
    }
    let s = io.stats();
    assert_eq!((s.copies, s.copied_bytes), (0, 0));
    assert_eq!((s.leases, s.live_buffers, s.retained_buffers), (0, 0, 1));
}

#[test]
fn dropping_the_arena_before_a_lease_or_a_dlpack_tensor_is_safe() {
    let io = IoArena::new();
    let mut a = io.allocate(3 << 20, 64).unwrap();
    fill(a.as_mut_slice(), 1);
    let lease = a.into_lease().unwrap();
    let mut b = io.allocate(4096, 64).unwrap();
    fill(b.as_mut_slice(), 2);
    let t = b
        .into_lease()
        .unwrap()
        .into_dlpack(DLDataType::U8, &[4096])
        .unwrap();
    drop(io);
    assert!(check(lease.as_slice(), 1));
    drop(lease);
    // SAFETY: the tensor is live; the deleter runs once, after the arena handle is gone.
    unsafe {
        let data = (*t.as_ptr()).dl_tensor.data as *const u8;
        assert!(check(std::slice::from_raw_parts(data, 4096), 2));
        ((*t.as_ptr()).deleter.unwrap())(t.as_ptr());
    }
}

#[test]
fn a_lease_released_from_another_thread_returns_its_buffer() {
    let io = IoArena::new();
    let leases: Vec<IoLease> = (0..16)
        .map(|i| {
            io.allocate(10_000 + i * 1000, 64)
                .unwrap()
                .into_lease()
                .unwrap()
        })
        .collect();
    let clones = leases.clone();
    let t = std::thread::spawn(move || drop(clones));
    drop(leases);
    t.join().unwrap();
    let s = io.stats();
    assert_eq!((s.leases, s.live_buffers, s.retained_buffers), (0, 0, 16));
}

#[test]
fn trim_and_cap_eviction_never_touch_leased_buffers() {
    let io = IoArena::with_config(ArenaConfig::default().retention_cap(0));
    let mut a = io.allocate(1 << 20, 64).unwrap();
    fill(a.as_mut_slice(), 9);
    let lease = a.into_lease().unwrap();
    drop(io.allocate(1 << 20, 64).unwrap());
    assert_eq!(io.trim(), 0);
    io.set_retention_cap(0);
    let s = io.stats();
    assert_eq!((s.leased_bytes, s.live_bytes), (1 << 20, 1 << 20));
    assert_eq!(s.retained_bytes, 0);
    assert!(check(lease.as_slice(), 9));
}

#[test]
fn dlpack_refuses_bad_shapes_and_dtypes() {
    use warmarena::handle::dlpack::DlpackError;
    let io = IoArena::new();
    let lease = || io.allocate(64, 64).unwrap().into_lease().unwrap();
    assert_eq!(
        lease().into_dlpack(DLDataType::F32, &[17]).unwrap_err(),
        DlpackError::TooLarge {
            needed: 68,
            available: 64
        }
    );
    assert_eq!(
        lease().into_dlpack(DLDataType::F32, &[-1]).unwrap_err(),
        DlpackError::BadShape
    );
    assert_eq!(
        lease()
            .into_dlpack(DLDataType::F32, &[i64::MAX, i64::MAX])
            .unwrap_err(),
        DlpackError::BadShape
    );
    let bits4 = DLDataType {
        code: 0,
        bits: 4,
        lanes: 1,
    };
    assert_eq!(
        lease().into_dlpack(bits4, &[2]).unwrap_err(),
        DlpackError::BadDtype
    );
    // Each refused export dropped its lease: the buffers are back.
    let s = io.stats();
    assert_eq!((s.leases, s.live_buffers), (0, 0));
    // A shared lease exports read-only.
    let l = lease();
    let keep = l.clone();
    let t = l.into_dlpack(DLDataType::U8, &[64]).unwrap();
    // SAFETY: live tensor, deleter called once.
    unsafe {
        assert_eq!(
            (*t.as_ptr()).flags & warmarena::handle::dlpack::DLPACK_FLAG_READ_ONLY,
            1
        );
        ((*t.as_ptr()).deleter.unwrap())(t.as_ptr());
    }
    drop(keep);
}

/// The child half of `a_double_release_through_a_raw_lease_aborts`.
#[test]
#[ignore = "run by a_double_release_through_a_raw_lease_aborts in a child process"]
fn child_double_release() {
    if std::env::var("WARMARENA_DOUBLE_RELEASE_CHILD").is_err() {
        return;
    }
    let io = IoArena::new();
    let raw = io.allocate(64, 8).unwrap().into_lease().unwrap().into_raw();
    // SAFETY: deliberately broken: `raw` had one owner and is released twice.
    unsafe {
        warmarena::handle::warmarena_lease_release(raw);
        println!("FIRST-RELEASE-OK");
        warmarena::handle::warmarena_lease_release(raw);
    }
    println!("SECOND-RELEASE-RETURNED");
    drop(io);
}

#[test]
fn a_double_release_through_a_raw_lease_aborts() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "handle_rules::child_double_release",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WARMARENA_DOUBLE_RELEASE_CHILD", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("FIRST-RELEASE-OK"),
        "child did not run: {text}\n{err}"
    );
    assert!(!text.contains("SECOND-RELEASE-RETURNED"), "{text}");
    assert!(!out.status.success());
    assert!(
        err.contains("released more times than it was retained"),
        "{err}"
    );
}
