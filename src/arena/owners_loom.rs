//! loom model of the owner-by-address table (`owners.rs`): an extracted
//! core, because the real table is a 512 KiB `static` of `const`-built
//! atomics, which loom's atomics cannot be. The functions below are the
//! real ones (`lookup`, `leaf`, `register`, `unregister`) line for line,
//! with the same orderings, over a table of 2 regions x 4 granules whose
//! leaves come from the heap instead of `os::map`. Keep them in step with
//! `owners.rs`.
//!
//! Checked: a thread that receives a buffer address through any
//! release/acquire hand-off sees the buffer's owner; two threads racing to
//! install the same leaf both get their granules registered (the loser's
//! leaf is freed, never published); unregistering clears only the caller's
//! own entries, so a new owner of reused addresses is never erased.
//!
//! Run: `bash scripts/loom.sh`.

use loom::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::ptr::null_mut;

const GRANULE_BITS: u32 = 4;
const GRANULE: usize = 1 << GRANULE_BITS;
const LEAF_BITS: u32 = 2;
const LEAF_LEN: usize = 1 << LEAF_BITS;
const TOP_LEN: usize = 2;

type Leaf = [AtomicPtr<()>; LEAF_LEN];

struct Table {
    top: [AtomicPtr<Leaf>; TOP_LEN],
}

impl Table {
    fn new() -> Self {
        Table {
            top: [AtomicPtr::new(null_mut()), AtomicPtr::new(null_mut())],
        }
    }

    fn split(addr: usize) -> Option<(usize, usize)> {
        let g = addr >> GRANULE_BITS;
        let top = g >> LEAF_BITS;
        (top < TOP_LEN).then_some((top, g & (LEAF_LEN - 1)))
    }

    fn lookup(&self, addr: usize) -> *mut () {
        let Some((top, i)) = Self::split(addr) else {
            return null_mut();
        };
        let leaf = self.top[top].load(Ordering::Acquire);
        if leaf.is_null() {
            return null_mut();
        }
        // SAFETY: installed leaves are freed only when the table is dropped.
        unsafe { (*leaf)[i].load(Ordering::Acquire) }
    }

    fn leaf(&self, top: usize) -> &Leaf {
        let cur = self.top[top].load(Ordering::Acquire);
        if !cur.is_null() {
            // SAFETY: see `lookup`.
            return unsafe { &*cur };
        }
        let fresh: *mut Leaf = Box::into_raw(Box::new([
            AtomicPtr::new(null_mut()),
            AtomicPtr::new(null_mut()),
            AtomicPtr::new(null_mut()),
            AtomicPtr::new(null_mut()),
        ]));
        match self.top[top].compare_exchange(null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: just published; lives as long as the table.
            Ok(_) => unsafe { &*fresh },
            Err(other) => {
                // SAFETY: our leaf lost the race and was never published.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: see `lookup`.
                unsafe { &*other }
            }
        }
    }

    fn whole_granules(base: usize, len: usize) -> core::ops::Range<usize> {
        let first = base.div_ceil(GRANULE);
        let end = base.saturating_add(len) / GRANULE;
        first..end.max(first)
    }

    fn register(&self, base: usize, len: usize, owner: *mut ()) -> bool {
        let mut all = true;
        for g in Self::whole_granules(base, len) {
            let ok = Self::split(g << GRANULE_BITS)
                .map(|(top, i)| (self.leaf(top), i))
                .map(|(l, i)| l[i].store(owner, Ordering::Release))
                .is_some();
            all &= ok;
        }
        all
    }

    fn unregister(&self, base: usize, len: usize, owner: *mut ()) {
        for g in Self::whole_granules(base, len) {
            let Some((top, i)) = Self::split(g << GRANULE_BITS) else {
                continue;
            };
            let l = self.top[top].load(Ordering::Acquire);
            if l.is_null() {
                continue;
            }
            // SAFETY: see `lookup`.
            let e = unsafe { &(*l)[i] };
            let _ = e.compare_exchange(owner, null_mut(), Ordering::Release, Ordering::Relaxed);
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        for t in &self.top {
            let p = t.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: installed leaves came from `Box::into_raw` and are
                // freed once, here, with no reader left.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

fn owner(tag: usize) -> *mut () {
    // Owners are identities only; never dereferenced.
    (tag * 8) as *mut ()
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    crate::sync::loom_model(3, f)
}

#[test]
fn loom_racing_leaf_installs_keep_both_registrations() {
    model(|| {
        let t = Arc::new(Table::new());
        let t2 = Arc::clone(&t);
        // Granules 0 and 1 of region 0: both threads find no leaf yet.
        let h = thread::spawn(move || assert!(t2.register(0, GRANULE, owner(1))));
        assert!(t.register(GRANULE, GRANULE, owner(2)));
        h.join().unwrap();
        assert_eq!(t.lookup(3), owner(1));
        assert_eq!(t.lookup(GRANULE + 3), owner(2));
        assert_eq!(t.lookup(2 * GRANULE), null_mut());
    });
}

#[test]
fn loom_a_published_buffer_address_always_finds_its_owner() {
    model(|| {
        let t = Arc::new(Table::new());
        let handoff = Arc::new(AtomicUsize::new(0));
        let (t2, h2) = (Arc::clone(&t), Arc::clone(&handoff));
        // The arena: register the mapping, then hand a buffer out.
        let a = thread::spawn(move || {
            t2.register(5 * GRANULE, 2 * GRANULE, owner(3));
            h2.store(5 * GRANULE + 1, Ordering::Release);
        });
        // Another thread frees the buffer: it must find the owner.
        let addr = handoff.load(Ordering::Acquire);
        if addr != 0 {
            assert_eq!(t.lookup(addr), owner(3));
        }
        a.join().unwrap();
    });
}

#[test]
fn loom_unregister_never_erases_the_next_owner_of_reused_addresses() {
    model(|| {
        let t = Arc::new(Table::new());
        t.register(0, 2 * GRANULE, owner(1));
        let unmapped = Arc::new(AtomicUsize::new(0));
        let (t2, u2) = (Arc::clone(&t), Arc::clone(&unmapped));
        // Arena 1 unregisters, then "unmaps" (the release store).
        let a = thread::spawn(move || {
            t2.unregister(0, 2 * GRANULE, owner(1));
            u2.store(1, Ordering::Release);
        });
        // Arena 2 gets the addresses once they are unmapped; a stale
        // unregister by arena 1 must not clear arena 2's entry.
        if unmapped.load(Ordering::Acquire) == 1 {
            t.register(0, GRANULE, owner(2));
            t.unregister(0, GRANULE, owner(1));
            assert_eq!(t.lookup(0), owner(2));
        }
        a.join().unwrap();
    });
}
