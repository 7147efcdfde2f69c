//! The synchronization primitives the crate uses, in one place, so that a
//! model checker can swap them (`cfg(loom)`) and so that the choice of lock is
//! made once.
//!
//! [`SpinLock`] is the arena lock: critical sections are a few list and
//! bitmap operations (tens of nanoseconds), so a lock whose release is a
//! plain store (and one load of a waiter count) beats a futex mutex, whose
//! release is a second atomic read-modify-write. Waiters spin a bounded
//! number of times, then park on a futex: a holder preempted in its
//! critical section (more threads than cores) no longer makes every waiter
//! burn its time slices spinning or yielding.

/// The atomics lock-free structures use (`arena::owners`), in one place so a
/// later `loom` model can swap them.
pub(crate) mod atomic {
    pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
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
use core::sync::atomic::{AtomicU32, Ordering};
#[cfg(not(loom))]
use crossbeam_utils::Backoff;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, Ordering};

/// A test-and-test-and-set lock: a bounded spin, then parking on a futex.
pub(crate) struct SpinLock<T> {
    /// 1 while held (a `u32`: the futex word waiters sleep on).
    locked: AtomicU32,
    /// Threads parked or about to park: a release wakes one when non-zero.
    #[cfg_attr(loom, allow(dead_code))]
    waiters: AtomicU32,
    value: UnsafeCell<T>,
}

/// The longest a parked waiter sleeps before it looks again. A release
/// whose load of `waiters` overtook its own store (a store-load reordering
/// the release does not fence against, to stay a plain store) can miss a
/// waiter that was just parking; the waiter then wakes by itself after
/// this bound instead of sleeping forever.
#[cfg(not(loom))]
const PARK_TIMEOUT_NS: i64 = 1_000_000;

/// How many times waiters parked (for the tests that check parking).
#[cfg(all(test, not(loom)))]
pub(crate) static PARKS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

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
            locked: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Under loom the flag is a loom atomic, whose constructor is not `const`.
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    #[inline(always)]
    fn try_acquire(&self) -> bool {
        self.locked
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Waits for the lock and returns its guard.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if !self.try_acquire() {
            self.lock_slow();
        }
        SpinGuard { lock: self }
    }

    /// Under loom a waiter yields to the model's scheduler at every turn.
    #[cfg(loom)]
    #[cold]
    fn lock_slow(&self) {
        while !self.try_acquire() {
            loom::thread::yield_now();
        }
    }

    /// Spins while the backoff allows (about a hundred pauses), then parks
    /// until a release wakes it (or `PARK_TIMEOUT_NS` passes).
    #[cfg(not(loom))]
    #[cold]
    fn lock_slow(&self) {
        let backoff = Backoff::new();
        loop {
            while self.locked.load(Ordering::Relaxed) != 0 {
                if backoff.is_completed() {
                    self.park();
                } else {
                    backoff.snooze();
                }
            }
            if self.try_acquire() {
                return;
            }
        }
    }

    /// Sleeps while the lock is held, announced in `waiters` first.
    #[cfg(not(loom))]
    #[cold]
    fn park(&self) {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if self.locked.load(Ordering::SeqCst) != 0 {
            #[cfg(test)]
            PARKS.fetch_add(1, Ordering::Relaxed);
            futex_wait(&self.locked, 1, PARK_TIMEOUT_NS);
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Lets go of the lock and wakes one parked waiter, if any announced
    /// itself. The waiter count is read *before* the release: once the
    /// lock is free, another thread may take it and free the memory it
    /// lives in (an arena's last one out destroys the body that holds its
    /// lock), so nothing after the release store touches the lock but the
    /// wake, which passes the word's address to the kernel as a key. A
    /// waiter that announces itself between the read and the store sleeps
    /// until `PARK_TIMEOUT_NS`, as one did before when the release's store
    /// and load were reordered.
    #[inline(always)]
    fn release(&self) {
        #[cfg(not(loom))]
        let waiting = self.waiters.load(Ordering::Relaxed) != 0;
        #[cfg(not(loom))]
        let word = self.locked.as_ptr();
        self.locked.store(0, Ordering::Release);
        #[cfg(not(loom))]
        if waiting {
            futex_wake(word);
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
        self.lock.release();
    }
}

/// Sleeps while `word` holds `expected`, at most `timeout_ns` (Linux futex;
/// elsewhere, and under Miri, a yield stands in for it).
#[cfg(not(loom))]
fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: i64) {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let ts = libc::timespec {
            tv_sec: timeout_ns / 1_000_000_000,
            tv_nsec: timeout_ns % 1_000_000_000,
        };
        // SAFETY: `word` is a live, aligned 32-bit atomic for the call; the
        // kernel only reads it and compares it with `expected`; `ts` lives
        // for the call. Any error (EAGAIN: the value changed; EINTR;
        // ETIMEDOUT) just returns to the caller's loop.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                &ts as *const libc::timespec,
            )
        };
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = (word, expected, timeout_ns);
        std::thread::yield_now();
    }
}

/// Wakes one thread sleeping in [`futex_wait`] on `word`.
#[cfg(not(loom))]
fn futex_wake(word: *mut u32) {
    #[cfg(all(target_os = "linux", not(miri)))]
    // SAFETY: FUTEX_WAKE only uses the address as the queue's key: it
    // neither reads nor writes the word, which may be freed by now (a
    // stale key at worst wakes a waiter of a reused address spuriously,
    // and every futex waiter re-checks its word).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word,
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = word;
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
    let f = std::sync::Arc::new(f);
    b.check(move || {
        seen.fetch_add(1, Relaxed);
        // On a loom thread with a 1 MiB stack: the model's own main thread
        // has a small fixed stack, which building an arena body (its state
        // is built in place, then boxed) plus loom's bookkeeping outgrew.
        let f = std::sync::Arc::clone(&f);
        loom::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || f())
            .expect("a loom thread")
            .join()
            .expect("the model's body");
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

    /// A holder that stays in its critical section (as a preempted one
    /// does) makes its waiters park instead of spinning; every one of them
    /// gets the lock once it is released.
    #[cfg(not(loom))]
    #[test]
    fn waiters_park_behind_a_long_holder() {
        let lock = SpinLock::new(0u64);
        let waiters = if cfg!(miri) { 2 } else { 6 };
        let before = PARKS.load(Ordering::Relaxed);
        std::thread::scope(|s| {
            let g = lock.lock();
            for _ in 0..waiters {
                s.spawn(|| *lock.lock() += 1);
            }
            // Hold until a waiter has spun out and parked (bounded: the
            // assertion below reports a waiter that never parks).
            for _ in 0..10_000 {
                if PARKS.load(Ordering::Relaxed) > before {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            drop(g);
        });
        assert_eq!(*lock.lock(), waiters);
        assert!(PARKS.load(Ordering::Relaxed) > before, "no waiter parked");
    }
}
