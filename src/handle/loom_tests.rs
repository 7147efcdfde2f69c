//! loom models of the lease refcount and the arena lifetime, on the real
//! types: under `cfg(loom)` the lease and handle counts (`sync::rc`) and
//! the arena lock (`sync::SpinLock`) are loom's, so loom explores every
//! interleaving of `IoLease::clone`/`drop`, `ArenaCore::unpin_and_free`,
//! `ArenaCore::free` and `CoreHandle::drop`. (The pages themselves still
//! come from the OS; they are not part of the model.)
//!
//! Run: `bash scripts/loom.sh` (`RUSTFLAGS="--cfg loom" cargo test --lib
//! --release loom_ -- --test-threads=1`).
//!
//! Each model checks that the buffer goes back exactly once, that
//! accounting balances, and that the arena body is freed exactly once and
//! only after its last handle, allocation and lease are gone
//! (`LIVE_BODIES`).

use crate::arena::shared::LIVE_BODIES;
use crate::{ArenaConfig, ExecutionArena, IoArena};
use loom::thread;
use std::sync::atomic::Ordering::SeqCst;

fn io() -> IoArena {
    IoArena::with_config(ArenaConfig::default().huge_pages(false))
}

/// Runs `f` under loom and checks afterwards that no arena body is left.
fn model(f: impl Fn() + Sync + Send + 'static) {
    crate::sync::loom_model(3, move || {
        let before = LIVE_BODIES.load(SeqCst);
        f();
        assert_eq!(
            LIVE_BODIES.load(SeqCst),
            before,
            "arena body leaked or freed twice"
        );
    })
}

#[test]
fn loom_last_lease_released_on_either_thread_returns_the_buffer_once() {
    model(|| {
        let io = io();
        let mut a = io.allocate(64, 8).unwrap();
        a.as_mut_slice().fill(7);
        let l = a.into_lease().unwrap();
        let c = l.clone();
        let t = thread::spawn(move || {
            assert_eq!(c.as_slice()[63], 7);
            drop(c);
        });
        assert_eq!(l.as_slice()[0], 7);
        drop(l);
        t.join().unwrap();
        let s = io.stats();
        assert_eq!((s.leases, s.leased_bytes, s.live_buffers), (0, 0, 0));
        assert_eq!((s.frees, s.retained_buffers), (1, 1));
    });
}

#[test]
fn loom_arena_dropped_while_the_last_lease_is_released_elsewhere() {
    model(|| {
        let io = io();
        let l = io.allocate(64, 8).unwrap().into_lease().unwrap();
        let t = thread::spawn(move || drop(l));
        // Whichever of the two goes last frees the body, exactly once.
        drop(io);
        t.join().unwrap();
    });
}

#[test]
fn loom_raw_retain_and_release_race_with_a_clone_drop() {
    model(|| {
        let io = io();
        let l = io.allocate(64, 8).unwrap().into_lease().unwrap();
        let c = l.clone();
        let raw = l.into_raw() as usize;
        let t = thread::spawn(move || {
            let raw = raw as *const core::ffi::c_void;
            // SAFETY: `raw` is a live raw lease owned by this thread: one
            // retain, then two releases.
            unsafe {
                crate::handle::warmarena_lease_retain(raw);
                crate::handle::warmarena_lease_release(raw);
                crate::handle::warmarena_lease_release(raw);
            }
        });
        drop(c);
        t.join().unwrap();
        let s = io.stats();
        assert_eq!((s.leases, s.live_buffers, s.frees), (0, 0, 1));
    });
}

#[test]
fn loom_allocation_dropped_on_another_thread_while_the_handle_goes() {
    model(|| {
        let arena = ExecutionArena::with_config(ArenaConfig::default().huge_pages(false));
        let a = arena.allocate(64, 8).unwrap();
        let b = arena.clone();
        let t = thread::spawn(move || {
            drop(a);
            drop(b);
        });
        drop(arena);
        t.join().unwrap();
    });
}
