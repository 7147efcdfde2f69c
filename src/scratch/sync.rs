//! The synchronization the claim protocol uses, in one place.
//!
//! Everything in `scratch` that locks, waits or counts across threads takes
//! its primitives from here, so a `loom` model can swap them in under
//! `cfg(loom)` without touching the protocol code. Poisoning is not an
//! error for us: every critical section in `scratch` leaves its state
//! consistent before anything that can panic runs, so a poisoned lock is
//! simply taken over.

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

/// Locks `m`, taking over a poisoned lock (see the module docs for why
/// that is sound here).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits on `cv`, taking over a poisoned lock like [`lock`].
pub(crate) fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(g).unwrap_or_else(|e| e.into_inner())
}
