//! The epoch word: how `trim`, `set_retention_cap` and the last handle's
//! drop reach the caches of every thread without stopping them.
//!
//! An arena's epoch is one `u64`: its id in the high 32 bits (so a cache's
//! remembered epoch names one arena, even after another is made at the
//! same address), a count in steps of [`EPOCH_STEP`], and two flags,
//! [`ORPHANED`] and [`NO_CACHE`], either of which turns caching off. It
//! only changes under the arena lock. A cache's hit compares it with the
//! epoch the cache last honoured (one relaxed load); on a difference the
//! cache's thread takes the lock and does what [`due`] says: give every
//! cached buffer back, releasing their pages too when a trim happened
//! since, then cache again only if no flag is set.
//!
//! Pure functions over plain words: the real code (`tcache/mod.rs`,
//! `shared.rs`) calls them, unit tests and Miri cover them, and the loom
//! model below runs the protocol they define against a concurrent `trim`.

/// Flag: every handle is gone; frees go straight to the arena.
pub(crate) const ORPHANED: u64 = 1;
/// Flag: caching is off (by configuration, a small retention cap, or
/// pattern mode).
pub(crate) const NO_CACHE: u64 = 2;
/// The count's step (above the flags).
pub(crate) const EPOCH_STEP: u64 = 4;
/// Retention caps below this turn the front end off for the arena, so the
/// cap keeps bounding every retained byte exactly as before (a thread's
/// cache holds up to `BIN_BYTES` per class, and as much again in the
/// class's spill for the classes up to 2 KiB).
pub(crate) const MIN_CAP_FOR_CACHE: usize = 64 << 20;

/// An arena's first epoch (before its flags): its id in the high bits; the
/// count below would need 2^30 trims to reach them.
pub(crate) const fn first_epoch(id: u64) -> u64 {
    id << 32
}

/// The flags for an arena's settings: caching is off when the config turns
/// it off, under a retention cap below [`MIN_CAP_FOR_CACHE`], and in
/// pattern mode (whose planned buffers the pattern seam serves and frees).
pub(crate) const fn epoch_flags(thread_cache: bool, cap: usize, pattern_on: bool) -> u64 {
    if !thread_cache || cap < MIN_CAP_FOR_CACHE || pattern_on {
        NO_CACHE
    } else {
        0
    }
}

/// The epoch after a `trim`: one step on, flags kept.
pub(crate) const fn after_trim(e: u64) -> u64 {
    e + EPOCH_STEP
}

/// The epoch after `set_retention_cap`: one step on, [`NO_CACHE`] as
/// `flags` says, [`ORPHANED`] kept.
pub(crate) const fn after_cap(e: u64, flags: u64) -> u64 {
    ((e & !NO_CACHE) + EPOCH_STEP) | (flags & NO_CACHE)
}

/// The epoch once the last handle is gone.
pub(crate) const fn orphaned(e: u64) -> u64 {
    e | ORPHANED
}

/// What a cache must do at its next slow path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    /// Give back every cached buffer's pages too (a trim happened since the
    /// cache last honoured the epoch).
    pub release: bool,
    /// Whether the cache may hold buffers again afterwards.
    pub caching: bool,
    /// The epoch the cache has honoured afterwards.
    pub seen: u64,
}

/// What a cache that last honoured `seen` must do, read under the arena
/// lock: the arena's epoch is `e` and its latest trim advanced it to
/// `trim_epoch` (0 when never trimmed). The caller gives every cached
/// buffer back first in any case (a cache with a stale epoch holds buffers
/// from before a trim or cap change). A new cache has `seen == u64::MAX`:
/// nothing to release.
pub(crate) const fn due(seen: u64, e: u64, trim_epoch: u64) -> Due {
    Due {
        release: seen != u64::MAX && trim_epoch > seen,
        caching: e & (ORPHANED | NO_CACHE) == 0,
        seen: e,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_trim_after_the_seen_epoch_releases_and_caching_follows_the_flags() {
        let e0 = first_epoch(7);
        assert_eq!(
            due(u64::MAX, e0, 0),
            Due {
                release: false,
                caching: true,
                seen: e0
            }
        );
        let e1 = after_trim(e0);
        assert!(due(e0, e1, e1).release);
        assert!(!due(e1, e1, e1).release, "the trim was honoured already");
        let e2 = after_cap(e1, NO_CACHE);
        let d = due(e1, e2, e1);
        assert!(!d.release && !d.caching);
        let e3 = after_cap(e2, 0);
        assert!(
            due(e2, e3, e1).caching,
            "a larger cap turns caching on again"
        );
        let e4 = orphaned(e3);
        assert!(!due(e3, e4, e1).caching);
        assert_eq!(after_cap(e4, 0) & ORPHANED, ORPHANED, "orphaned stays");
    }

    #[test]
    fn two_arenas_never_share_an_epoch() {
        // The same count and flags in two arenas differ in the id bits.
        let a = after_trim(first_epoch(1));
        let b = after_trim(first_epoch(2));
        assert_ne!(a, b);
        assert_ne!(orphaned(a), orphaned(b));
    }

    #[test]
    fn no_epoch_a_cache_honours_is_the_never_word() {
        // The fast path compares a cache's seen epoch with the arena's and
        // reads `u64::MAX` when the thread has no cache (`NEVER`): only an
        // epoch without flags is honoured, and the never word has them.
        for id in [1, 2, u64::from(u32::MAX) - 1, u64::from(u32::MAX)] {
            let mut e = first_epoch(id);
            for step in 0..4 {
                let d = due(u64::MAX, e, 0);
                if d.caching {
                    assert_ne!(d.seen, u64::MAX, "id {id}, step {step}");
                }
                e = match step {
                    0 => after_trim(e),
                    1 => after_cap(e, NO_CACHE),
                    _ => orphaned(e),
                };
            }
            assert!(!due(u64::MAX, u64::MAX, 0).caching);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::SpinLock;
    use loom::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use loom::sync::Arc;
    use loom::thread;

    /// The arena side of the model: what the lock guards.
    #[derive(Default)]
    struct Arena {
        /// Buffers retained by the arena (free, pages kept).
        retained: u64,
        /// Buffers whose pages a trim released.
        released: u64,
        trim_epoch: u64,
    }

    /// One thread's cache: `seen` and `held` are its thread's alone.
    struct Cache {
        seen: u64,
        held: u64,
    }

    /// A free on the cache's thread, as `tcache::free` does it: the hit
    /// when the epoch matches, else the slow path under the lock.
    fn free_one(lock: &SpinLock<Arena>, epoch: &AtomicU64, c: &mut Cache) {
        if epoch.load(Relaxed) == c.seen {
            c.held += 1;
            return;
        }
        let mut st = lock.lock();
        let d = due(c.seen, epoch.load(Relaxed), st.trim_epoch);
        if d.release {
            st.released += c.held;
        } else {
            st.retained += c.held;
        }
        c.held = 0;
        if d.caching {
            c.seen = d.seen;
            c.held += 1;
        } else {
            st.retained += 1;
        }
    }

    /// `trim` on another thread, as `ArenaCore::trim` does it.
    fn trim(lock: &SpinLock<Arena>, epoch: &AtomicU64) {
        let mut st = lock.lock();
        let e = after_trim(epoch.load(Relaxed));
        epoch.store(e, Relaxed);
        st.trim_epoch = e;
        st.released += st.retained;
        st.retained = 0;
    }

    /// A cache's frees race a trim on another thread: no buffer is lost or
    /// counted twice, and once the trim is over (joined), the cache's next
    /// operation gives back and releases what it held before the trim.
    #[test]
    fn loom_a_trim_reaches_another_threads_cache_at_its_next_operation() {
        crate::sync::loom_model(3, || {
            let lock = Arc::new(SpinLock::new(Arena::default()));
            let epoch = Arc::new(AtomicU64::new(first_epoch(1)));
            let (l2, e2) = (Arc::clone(&lock), Arc::clone(&epoch));
            let t = thread::spawn(move || trim(&l2, &e2));
            let mut c = Cache {
                seen: u64::MAX,
                held: 0,
            };
            free_one(&lock, &epoch, &mut c);
            free_one(&lock, &epoch, &mut c);
            t.join().unwrap();
            // The trim is over: the next operation must honour it. A cache
            // that last honoured an epoch from before the trim holds
            // buffers the trim could not reach (they count as live).
            let stale = c.seen != epoch.load(Relaxed);
            let held_then = c.held;
            free_one(&lock, &epoch, &mut c);
            let st = lock.lock();
            assert_eq!(
                st.retained + st.released + c.held,
                3,
                "a buffer lost or doubled"
            );
            assert_eq!(c.seen, epoch.load(Relaxed), "the cache missed the trim");
            if stale {
                assert_eq!(c.held, 1, "the cache kept buffers from before the trim");
                assert!(st.released >= held_then, "their pages were not released");
            }
        });
    }

    /// The last handle's drop (orphaning) races a cache's frees: after it,
    /// the cache holds nothing and caches nothing more.
    #[test]
    fn loom_an_orphaned_arena_gets_every_cached_buffer_back() {
        crate::sync::loom_model(3, || {
            let lock = Arc::new(SpinLock::new(Arena::default()));
            let epoch = Arc::new(AtomicU64::new(first_epoch(1)));
            let (l2, e2) = (Arc::clone(&lock), Arc::clone(&epoch));
            let t = thread::spawn(move || {
                let _st = l2.lock();
                e2.store(orphaned(e2.load(Relaxed)), Relaxed);
            });
            let mut c = Cache {
                seen: u64::MAX,
                held: 0,
            };
            free_one(&lock, &epoch, &mut c);
            t.join().unwrap();
            free_one(&lock, &epoch, &mut c);
            let st = lock.lock();
            assert_eq!(c.held, 0, "an orphaned arena's buffers stayed cached");
            assert_eq!(st.retained, 2);
        });
    }
}
