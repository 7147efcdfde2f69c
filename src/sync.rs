//! The synchronization primitives the crate uses, in one place, so that a
//! model checker can swap them (`cfg(loom)`) and so that the choice of lock is
//! made once.
//!
//! [`SpinLock`] is the arena lock: critical sections are a few list and
//! bitmap operations (tens of nanoseconds), so a lock whose release is a
//! plain store beats a futex mutex, whose release is a second atomic
//! read-modify-write. Waiters spin briefly and then yield the CPU; the long
//! holders (system calls on the cold path, `trim`) are rare by design.

/// The atomics lock-free structures use (`arena::owners`), in one place so a
/// later `loom` model can swap them.
pub(crate) mod atomic {
    pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
}

/// The atomics of the lease and arena-handle reference counts
/// (`arena::pins`, `arena::shared`, `handle::lease`): loom's under
/// `cfg(loom)`, so the loom models (`src/handle/loom_tests.rs`) explore every
/// interleaving of the real refcount and last-release code.
pub(crate) mod rc {
    #[cfg(not(loom))]
    pub(crate) use core::sync::atomic::{fence, AtomicUsize, Ordering};
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{fence, AtomicUsize, Ordering};
}

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, Ordering};
#[cfg(not(loom))]
use crossbeam_utils::Backoff;
#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};

/// A test-and-test-and-set lock with spin-then-yield waiting.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out at most one guard at a time, so `&SpinLock<T>`
// shared across threads gives exclusive access to `T` in turn, which is
// sound whenever `T` may be sent between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: owning the lock is owning the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Under loom the flag is a loom atomic, whose constructor is not `const`.
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Waits for the lock and returns its guard.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
        SpinGuard { lock: self }
    }

    /// Under loom a waiter yields to the model's scheduler at every turn.
    #[cfg(loom)]
    #[cold]
    fn lock_slow(&self) {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            loom::thread::yield_now();
        }
    }

    #[cfg(not(loom))]
    #[cold]
    fn lock_slow(&self) {
        let backoff = Backoff::new();
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if backoff.is_completed() {
                    std::thread::yield_now();
                } else {
                    backoff.snooze();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// The value, through exclusive access to the lock itself.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// Exclusive access to a [`SpinLock`]'s value until dropped.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// Runs `f` under loom (the loom tests' one harness): every interleaving up
/// to `LOOM_MAX_PREEMPTIONS` preemptions, or `default_bound` when that is
/// unset, then prints how many interleavings were explored.
#[cfg(all(test, loom))]
pub(crate) fn loom_model(default_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(default_bound);
    }
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&runs);
    b.check(move || {
        seen.fetch_add(1, Relaxed);
        f()
    });
    eprintln!("loom: {} interleavings explored", runs.load(Relaxed));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_other_threads() {
        let lock = SpinLock::new(0u64);
        let threads = if cfg!(miri) { 2 } else { 4 };
        let rounds = if cfg!(miri) { 50 } else { 20_000 };
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..rounds {
                        let mut g = lock.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                });
            }
        });
        assert_eq!(*lock.lock(), threads * rounds);
    }
}
