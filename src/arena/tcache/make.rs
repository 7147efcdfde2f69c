//! Making a thread's cache: written field by field where it will live.
//!
//! A cache is about 95 KiB (79 bins of 64 entries of 16 bytes, the
//! large slots).
//! Built as one value and boxed, it went through the stack twice (the bins
//! array, then the whole cache) before the copy into the box: about
//! 140 KiB of copies per thread and arena, most of a short-lived
//! thread's cost. Here the box's memory is allocated first and each field
//! written into it once.

use super::bin::Bin;
use super::cache::{Cache, Counters, Own, View};
use super::heap_slot::HeapSlot;
use super::hints::Recent;
use super::large::LARGE_BYTES;
use super::large::{Large, LARGE_CLASSES};
use super::link::Link;
use super::spill::Spill;
use super::steal::{class_bit, Guard};
use super::SMALL_CLASSES;
use crate::arena::metadata;
use crate::arena::shared::ArenaCore;
use crate::size_class::capacity;
use core::cell::{Cell, UnsafeCell};
use core::ptr::{addr_of_mut, NonNull};
use core::sync::atomic::{AtomicU64, AtomicUsize};
use std::alloc::Layout;

impl Cache {
    /// A cache for `core`, whose original body pointer (`ArenaState::owner`,
    /// from `Box::into_raw`: the provenance a destroy needs) is `body`;
    /// `None` when the system allocator has no room for it (the thread then
    /// goes to the arena directly). Written into `spare`, a left cache's
    /// memory the arena kept (`spare.rs`), when there is one.
    pub(super) fn new(
        core: &ArenaCore,
        body: *const ArenaCore,
        spare: Option<NonNull<Cache>>,
    ) -> Option<Box<Cache>> {
        let _m = metadata::enter();
        let layout = Layout::new::<Cache>();
        let p = match spare {
            Some(p) => p.as_ptr(),
            // SAFETY: `Cache` is not zero-sized.
            None => NonNull::new(unsafe { std::alloc::alloc(layout) }.cast::<Cache>())?.as_ptr(),
        };
        // SAFETY: `p` is valid for writes of a `Cache` and aligned for it
        // (fresh from the allocator with its layout, or a kept cache's
        // memory from `Box::into_raw`, whose old fields need no drop);
        // every field is written once before `Box::from_raw` (the patterns
        // in `all_fields_written` stop the build when a field is added and
        // not written here), and the box frees it with the same layout. A
        // kept cache's bins are reset through a `&mut Bin` instead: its
        // memory holds the valid `Bin` values of the cache it was (plain
        // integers, not dropped, not written since), and no other
        // reference to it exists (the arena handed it to this call alone).
        unsafe {
            addr_of_mut!((*p).seen).write(Cell::new(u64::MAX));
            addr_of_mut!((*p).core).write(body);
            addr_of_mut!((*p).id).write(core.id);
            addr_of_mut!((*p).link).write(Link::new());
            addr_of_mut!((*p).counters).write(Counters::default());
            addr_of_mut!((*p).view).write(View {
                floor: AtomicU64::new(u64::MAX),
                large_budget: AtomicUsize::new(LARGE_BYTES),
                ..View::default()
            });
            let o: *mut Own = UnsafeCell::raw_get(addr_of_mut!((*p).own));
            addr_of_mut!((*o).off_seen).write(u64::MAX);
            addr_of_mut!((*o).published).write(0);
            let bins = addr_of_mut!((*o).bins).cast::<Bin>();
            for c in 0..SMALL_CLASSES {
                if spare.is_some() {
                    // A kept cache's bins are `Bin` values still (plain
                    // integers, never dropped): reset, slots left unwritten.
                    (*bins.add(c)).reset(capacity(c));
                } else {
                    bins.add(c).write(Bin::new(capacity(c)));
                }
            }
            let guards = addr_of_mut!((*p).spill_guards).cast::<Guard>();
            for c in 0..SMALL_CLASSES {
                guards.add(c).write(Guard::default());
            }
            // `UnsafeCell<Spill>` has `Spill`'s layout.
            let spills = addr_of_mut!((*p).spills).cast::<Spill>();
            let mut rooms = 0u64;
            for c in 0..SMALL_CLASSES {
                if spare.is_some() {
                    // A kept cache's spills are `Spill` values still, empty
                    // since its thread left: their room is kept.
                    let s = &mut *spills.add(c);
                    s.reset();
                    if s.has_room() {
                        rooms |= class_bit(c);
                    }
                } else {
                    spills.add(c).write(Spill::EMPTY);
                }
            }
            addr_of_mut!((*o).spill_rooms).write(rooms);
            let large = addr_of_mut!((*o).large).cast::<Large>();
            for k in 0..LARGE_CLASSES {
                large.add(k).write(Large::default());
            }
            addr_of_mut!((*o).large_bytes).write(0);
            addr_of_mut!((*o).big_bytes).write(0);
            addr_of_mut!((*o).heap).write(HeapSlot::default());
            addr_of_mut!((*o).recent).write([Recent::default(); SMALL_CLASSES]);
            Some(Box::from_raw(p))
        }
    }
}

/// Never called: its patterns list every field of `Cache` and `Own`
/// without `..`, so adding a field fails to build until [`Cache::new`]
/// writes it too.
#[allow(dead_code)]
fn all_fields_written(c: &Cache, o: &Own) {
    let Cache {
        seen: _,
        core: _,
        id: _,
        link: _,
        counters: _,
        view: _,
        own: _,
        spill_guards: _,
        spills: _,
    } = c;
    let Own {
        off_seen: _,
        published: _,
        bins: _,
        spill_rooms: _,
        large: _,
        large_bytes: _,
        big_bytes: _,
        heap: _,
        recent: _,
    } = o;
}
