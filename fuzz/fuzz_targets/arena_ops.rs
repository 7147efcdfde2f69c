//! Arbitrary sequences of allocate / resize / grow / shrink / free / export /
//! clone / drop-lease / raw export / trim / set-cap / drop-arena / a run
//! boundary on another thread (the execution heap moving away and back) across an
//! `ExecutionArena` and an `IoArena`, checked against a model of the policy
//! (`tests/common/policy_model.rs`, shared with `tests/suite/arena_model.rs`;
//! here also over leases and the allocator API). After every operation:
//!
//! - live, retained, peak, leased bytes and buffer counts match the model
//!   for each arena exactly; a buffer freed on another thread takes an
//!   uncertain place in the free order (the arena orders it only after the
//!   frees its thread had seen), so once an eviction depends on where it
//!   stands, the model checks live bytes, peak and leases (and the cap)
//!   until the next trim, after which neither side retains anything;
//! - no two live buffers (in either arena, or an arena already dropped)
//!   overlap, and every buffer keeps the bytes written into it;
//! - bad input (zero size, overflow, bad or too large alignment, a size the
//!   OS refuses) gets an error and leaves the arena's accounting unchanged.
#![no_main]

use allocator_api2::alloc::{Allocator, Layout};
use core::ptr::NonNull;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use warmarena::size_class::class_of;
use warmarena::{
    Allocation, ArenaConfig, ArenaError, ArenaStats, ExecutionArena, IoArena, IoLease,
};

#[path = "../../tests/common/policy_model.rs"]
mod policy_model;
use policy_model::{Held, PolicyModel};

warmarena_fuzz::op_counts!(
    COUNTS,
    "arena_ops",
    [
        "alloc",
        "alloc_bad",
        "resize",
        "raw_alloc",
        "grow",
        "grow_moved",
        "shrink",
        "free",
        "raw_free",
        "export",
        "export_refused",
        "clone",
        "drop_lease",
        "last_lease",
        "raw_roundtrip",
        "trim",
        "set_cap",
        "drop_arena",
        "warm_served",
        "evicting_ops",
        "free_on_thread",
        "inexact_checks",
        "grown_in_place",
        "shrunk_in_place",
        "run_on_thread",
        "heap_moved_away",
        "streams",
        "streamed"
    ]
);
const ALLOC: usize = 0;
const ALLOC_BAD: usize = 1;
const RESIZE: usize = 2;
const RAW_ALLOC: usize = 3;
const GROW: usize = 4;
const GROW_MOVED: usize = 5;
const SHRINK: usize = 6;
const FREE: usize = 7;
const RAW_FREE: usize = 8;
const EXPORT: usize = 9;
const EXPORT_REFUSED: usize = 10;
const CLONE: usize = 11;
const DROP_LEASE: usize = 12;
const LAST_LEASE: usize = 13;
const RAW_ROUNDTRIP: usize = 14;
const TRIM: usize = 15;
const SET_CAP: usize = 16;
const DROP_ARENA: usize = 17;
const WARM_SERVED: usize = 18;
const EVICTING: usize = 19;
const FREE_ON_THREAD: usize = 20;
const INEXACT_CHECKS: usize = 21;
const GROWN_IN_PLACE: usize = 22;
const SHRUNK_IN_PLACE: usize = 23;
const RUN_ON_THREAD: usize = 24;
const HEAP_MOVED_AWAY: usize = 25;
const STREAMS: usize = 26;
const STREAMED: usize = 27;

#[derive(Debug)]
enum Op {
    Alloc {
        io: bool,
        size: u32,
        align_shift: u8,
    },
    AllocBad {
        io: bool,
        which: u8,
    },
    Resize {
        idx: u8,
        len: u32,
    },
    RawAlloc {
        io: bool,
        size: u32,
        align_shift: u8,
    },
    Grow {
        idx: u8,
        add: u32,
        align_shift: u8,
    },
    Shrink {
        idx: u8,
        to: u32,
    },
    Free {
        idx: u8,
    },
    RawFree {
        idx: u8,
    },
    /// Frees a buffer on a new thread that exits at once (its thread cache
    /// goes back to the arena on exit), through the handle or the
    /// allocator API.
    FreeOnThread {
        idx: u8,
        raw: bool,
    },
    Export {
        idx: u8,
        via_arena: bool,
    },
    Clone {
        idx: u8,
    },
    DropLease {
        idx: u8,
    },
    RawRoundTrip {
        idx: u8,
    },
    Trim {
        io: bool,
    },
    SetCap {
        io: bool,
        cap: Option<u32>,
    },
    DropArena {
        io: bool,
    },
    /// A run boundary (`begin_run`) of the execution arena on a new thread
    /// that exits at once: the heap may move to it and come back.
    RunOnThread,
    /// `count` buffers of one small size allocated, written, and freed
    /// again in allocation order, in reverse or shuffled: a thread
    /// streaming through a class, past its bin and into (and past) its
    /// spill (`tcache/spill.rs`).
    Stream {
        io: bool,
        size: u32,
        count: u8,
    },
}

/// Sizes from a few bytes up to 4 MiB, small ones most often.
fn size_of(s: u32) -> usize {
    let v = (s >> 2) as usize;
    match s & 7 {
        0..=4 => 1 + v % 4096,
        5 | 6 => 1 + v % (256 << 10),
        _ => 1 + v % (4 << 20),
    }
}

fn align_of(shift: u8) -> usize {
    // Mostly small; up to 64 KiB (the arena serves up to 2 MiB).
    if shift < 192 {
        1 << (shift % 5)
    } else {
        1 << (shift % 17)
    }
}

/// One arena slot (0: execution, 1: I/O): the arena, its model, its epoch.
struct Slot<A> {
    arena: A,
    model: PolicyModel,
    epoch: u64,
}

impl<A> Drop for Slot<A> {
    fn drop(&mut self) {
        COUNTS.add(EVICTING, self.model.evicting_ops);
    }
}

/// Where a buffer came from: arena slot and that slot's epoch.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Origin {
    io: bool,
    epoch: u64,
}

struct Owned {
    a: Allocation,
    held: Held,
    origin: Origin,
    byte: u8,
}

struct Raw {
    ptr: NonNull<u8>,
    layout: Layout,
    cap: usize,
    held: Held,
    origin: Origin,
    byte: u8,
    /// The arena it came from, kept so it can be freed even after the slot
    /// moved on to a new arena.
    arena: Either,
}

#[derive(Clone)]
enum Either {
    Exec(ExecutionArena),
    Io(IoArena),
}

impl Either {
    fn alloc(&self) -> &dyn Allocator {
        match self {
            Either::Exec(a) => a,
            Either::Io(a) => a,
        }
    }
}

struct Leased {
    held: Held,
    cap: usize,
    origin: Origin,
    byte: u8,
    len: usize,
}

/// The parts of a buffer of `len` bytes that are written and checked: all
/// of it up to 64 KiB, else its first and last 16 KiB (enough to catch an
/// overlap or a reuse, at a fraction of the cost under ASan).
fn parts(len: usize) -> [(usize, usize); 2] {
    const EDGE: usize = 16 << 10;
    if len <= 4 * EDGE {
        [(0, len), (len, 0)]
    } else {
        [(0, EDGE), (len - EDGE, EDGE)]
    }
}

fn fill(p: *mut u8, len: usize, byte: u8) {
    for (at, n) in parts(len) {
        // SAFETY: callers pass a live buffer of at least `len` writable
        // bytes, and `at + n <= len`.
        unsafe { p.add(at).write_bytes(byte, n) };
    }
}

fn holds(p: *const u8, len: usize, byte: u8) -> bool {
    parts(len).iter().all(|&(at, n)| {
        // SAFETY: callers pass a live buffer of at least `len` readable
        // bytes, and `at + n <= len`.
        unsafe { core::slice::from_raw_parts(p.add(at), n) }
            .iter()
            .all(|&b| b == byte)
    })
}

struct World {
    exec: Slot<ExecutionArena>,
    io: Slot<IoArena>,
    owned: Vec<Owned>,
    raw: Vec<Raw>,
    leases: Vec<(IoLease, u64)>,
    leased: HashMap<u64, Leased>,
    next_id: u64,
    byte: u8,
}

/// The model places the execution heap by best fit: learned placement is
/// off (its own tests are `src/arena/heap/learn_tests.rs`). The policy
/// model is the block path's (per-buffer retention): the run-owning small
/// path keeps and releases whole runs and has its own model
/// (`tests/suite/run_model.rs`).
fn config() -> ArenaConfig {
    ArenaConfig::default()
        .huge_pages(false)
        .learn_placement(false)
        .run_ownership(false)
}

impl World {
    fn new() -> Self {
        World {
            exec: Slot {
                arena: ExecutionArena::with_config(config()),
                model: PolicyModel::execution(),
                epoch: 0,
            },
            io: Slot {
                arena: IoArena::with_config(config()),
                model: PolicyModel::default(),
                epoch: 0,
            },
            owned: Vec::new(),
            raw: Vec::new(),
            leases: Vec::new(),
            leased: HashMap::new(),
            next_id: 0,
            byte: 0,
        }
    }

    fn next_byte(&mut self) -> u8 {
        self.byte = self.byte.wrapping_add(1).max(1);
        self.byte
    }

    fn stats(&self, io: bool) -> ArenaStats {
        if io {
            self.io.arena.stats()
        } else {
            self.exec.arena.stats()
        }
    }

    /// The model of `origin`'s arena, if that arena is still the slot's.
    fn model(&mut self, origin: Origin) -> Option<&mut PolicyModel> {
        if origin.io {
            (self.io.epoch == origin.epoch).then_some(&mut self.io.model)
        } else {
            (self.exec.epoch == origin.epoch).then_some(&mut self.exec.model)
        }
    }

    /// Allocates `size` bytes at `align` from the execution or the I/O
    /// arena, checks the grant against the policy model (capacity, warm
    /// or cold while the model is exact, alignment, length) and fills it
    /// with a fresh byte; the buffer, and whether the model served it warm.
    fn alloc_checked(&mut self, io: bool, size: usize, align: usize) -> (Owned, bool) {
        let r = if io {
            self.io.arena.allocate(size, align)
        } else {
            self.exec.arena.allocate(size, align)
        };
        let mut a = r.expect("a valid request is served");
        let origin = self.origin(io);
        let m = self.model(origin).unwrap();
        let exact = m.exact();
        let (held, warm) = m.alloc_any(size, align);
        assert_eq!(a.capacity(), m.cap_of(held), "served capacity");
        if exact {
            // Otherwise the model no longer knows what is retained.
            assert_eq!(a.served_warm(), warm, "warm or cold");
        }
        assert_eq!(a.as_ptr() as usize % align, 0, "alignment");
        assert_eq!(a.len(), size);
        let byte = self.next_byte();
        fill(a.as_mut_ptr(), a.capacity(), byte);
        let o = Owned {
            a,
            held,
            origin,
            byte,
        };
        (o, warm)
    }

    /// Checks that `o` still holds its byte, frees it, and tells the model.
    fn free_checked(&mut self, o: Owned) {
        assert!(holds(o.a.as_ptr(), o.a.capacity(), o.byte), "bytes changed");
        drop(o.a);
        if let Some(m) = self.model(o.origin) {
            m.free_any(o.held);
        }
    }

    fn origin(&self, io: bool) -> Origin {
        Origin {
            io,
            epoch: if io { self.io.epoch } else { self.exec.epoch },
        }
    }

    fn current_allocator(&self, io: bool) -> Either {
        if io {
            Either::Io(self.io.arena.clone())
        } else {
            Either::Exec(self.exec.arena.clone())
        }
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Alloc {
                io,
                size,
                align_shift,
            } => {
                COUNTS.bump(ALLOC);
                let (size, align) = (size_of(size), align_of(align_shift));
                let (o, warm) = self.alloc_checked(io, size, align);
                if warm {
                    COUNTS.bump(WARM_SERVED);
                }
                self.owned.push(o);
            }
            Op::AllocBad { io, which } => {
                COUNTS.bump(ALLOC_BAD);
                let (size, align) = match which % 7 {
                    0 => (0, 8),
                    1 => (usize::MAX, 8),
                    2 => (usize::MAX - 4095, 4096),
                    3 => (64, 0),
                    4 => (64, 24),
                    5 => (64, 4 << 20),
                    // Rounds fine but no mapping can hold it: the OS refuses.
                    _ => (1 << 62, 64),
                };
                let before = self.stats(io);
                let r = if io {
                    self.io.arena.allocate(size, align)
                } else {
                    self.exec.arena.allocate(size, align)
                };
                match r {
                    Err(
                        ArenaError::ZeroSize
                        | ArenaError::BadAlignment { .. }
                        | ArenaError::UnsupportedAlignment { .. }
                        | ArenaError::SizeOverflow { .. }
                        | ArenaError::OutOfMemory { .. },
                    ) => {}
                    other => panic!("bad request ({size}, {align}) answered {other:?}"),
                }
                let after = self.stats(io);
                assert_eq!(before.live_bytes, after.live_bytes);
                assert_eq!(before.retained_bytes, after.retained_bytes);
                assert_eq!(before.mapped_bytes, after.mapped_bytes);
            }
            Op::Resize { idx, len } => {
                if self.owned.is_empty() {
                    return;
                }
                COUNTS.bump(RESIZE);
                let i = idx as usize % self.owned.len();
                let o = &mut self.owned[i];
                let len = len as usize % (o.a.capacity() * 2 + 1);
                let (p, cap) = (o.a.as_ptr(), o.a.capacity());
                match o.a.set_len(len) {
                    Ok(()) => assert!(len <= cap && o.a.len() == len),
                    Err(ArenaError::BeyondCapacity { .. }) => assert!(len > cap),
                    Err(e) => panic!("resize answered {e:?}"),
                }
                assert_eq!((o.a.as_ptr(), o.a.capacity()), (p, cap), "resize moved");
            }
            Op::RawAlloc {
                io,
                size,
                align_shift,
            } => {
                COUNTS.bump(RAW_ALLOC);
                let (size, align) = (size_of(size), align_of(align_shift));
                let layout = Layout::from_size_align(size, align).unwrap();
                let arena = self.current_allocator(io);
                let p = arena.alloc().allocate(layout).expect("served");
                let origin = self.origin(io);
                let m = self.model(origin).unwrap();
                let (held, _) = m.alloc_any(size, align);
                assert_eq!(p.len(), m.cap_of(held), "raw served capacity");
                let ptr = p.cast::<u8>();
                assert_eq!(ptr.as_ptr() as usize % align, 0);
                let byte = self.next_byte();
                fill(ptr.as_ptr(), size, byte);
                self.raw.push(Raw {
                    ptr,
                    layout,
                    cap: p.len(),
                    held,
                    origin,
                    byte,
                    arena,
                });
            }
            Op::Grow {
                idx,
                add,
                align_shift,
            } => {
                if self.raw.is_empty() {
                    return;
                }
                COUNTS.bump(GROW);
                let i = idx as usize % self.raw.len();
                let byte = self.next_byte();
                let r = &self.raw[i];
                let add = add as usize % (if add & 1 == 0 { 4096 } else { 1 << 20 });
                let size = (r.layout.size() + add).min(4 << 20).max(r.layout.size());
                let align = r.layout.align().max(align_of(align_shift));
                let new = Layout::from_size_align(size, align).unwrap();
                let aligned = r.ptr.as_ptr() as usize % align == 0;
                let in_place = size <= r.cap && aligned;
                // Past its capacity, a heap piece grows into the free
                // extent above it (the model says whether there is room).
                let (origin, held) = (r.origin, r.held);
                let grown = match self.model(origin) {
                    Some(m) if !in_place && aligned => m.grow_in_place(held, size, align),
                    _ => None,
                };
                let r = &self.raw[i];
                // SAFETY: `r.ptr` is a live block of this allocator made with
                // `r.layout`, and `new.size() >= r.layout.size()`.
                let p = unsafe { r.arena.alloc().grow(r.ptr, r.layout, new) }.expect("grow");
                let np = p.cast::<u8>();
                assert!(
                    holds(np.as_ptr(), r.layout.size(), r.byte),
                    "grow lost bytes"
                );
                assert_eq!(np.as_ptr() as usize % align, 0);
                let old = r.held;
                let held = if in_place {
                    assert_eq!(np, r.ptr, "grow within capacity moved");
                    old
                } else if let Some(cap) = grown {
                    COUNTS.bump(GROWN_IN_PLACE);
                    assert_eq!(np, r.ptr, "a heap piece with room above moved");
                    assert_eq!(p.len(), cap, "grown capacity");
                    old
                } else {
                    COUNTS.bump(GROW_MOVED);
                    let model = self.model(origin);
                    match model {
                        Some(m) => {
                            let (h, _) = m.alloc_any(size, align);
                            m.free_any(old);
                            assert_eq!(p.len(), m.cap_of(h), "grown capacity");
                            h
                        }
                        // No model to answer to any more.
                        None => Held::Class(class_of(p.len()).unwrap_or(0)),
                    }
                };
                let r = &mut self.raw[i];
                r.ptr = np;
                r.layout = new;
                r.cap = p.len();
                r.held = held;
                r.byte = byte;
                fill(np.as_ptr(), size, byte);
            }
            Op::Shrink { idx, to } => {
                if self.raw.is_empty() {
                    return;
                }
                COUNTS.bump(SHRINK);
                let i = idx as usize % self.raw.len();
                let r = &self.raw[i];
                let size = to as usize % (r.layout.size() + 1);
                let new = Layout::from_size_align(size, r.layout.align()).unwrap();
                assert!(holds(r.ptr.as_ptr(), r.layout.size(), r.byte));
                // SAFETY: `r.ptr` is a live block of this allocator made with
                // `r.layout`, and `new.size() <= r.layout.size()`.
                let p = unsafe { r.arena.alloc().shrink(r.ptr, r.layout, new) }.expect("shrink");
                if size == 0 {
                    // The block went back to the arena.
                    let r = self.raw.swap_remove(i);
                    if let Some(m) = self.model(r.origin) {
                        m.free_any(r.held);
                    }
                    return;
                }
                assert_eq!(p.cast::<u8>(), r.ptr, "shrink moved");
                fill(r.ptr.as_ptr(), size, r.byte);
                // A heap piece gives the pages past its new size back.
                let (origin, held, old_size, cap) = (r.origin, r.held, r.layout.size(), r.cap);
                if size < old_size {
                    if let Some(kept) = self
                        .model(origin)
                        .and_then(|m| m.shrink_in_place(held, size, new.align()))
                    {
                        assert_eq!(p.len(), kept, "shrunk capacity");
                        if kept < cap {
                            COUNTS.bump(SHRUNK_IN_PLACE);
                        }
                    }
                }
                self.raw[i].layout = new;
                self.raw[i].cap = p.len();
            }
            Op::Free { idx } => {
                if self.owned.is_empty() {
                    return;
                }
                COUNTS.bump(FREE);
                let o = self.owned.swap_remove(idx as usize % self.owned.len());
                self.free_checked(o);
            }
            Op::RawFree { idx } => {
                if self.raw.is_empty() {
                    return;
                }
                COUNTS.bump(RAW_FREE);
                let r = self.raw.swap_remove(idx as usize % self.raw.len());
                assert!(holds(r.ptr.as_ptr(), r.layout.size(), r.byte));
                // SAFETY: a live block of this allocator made with `r.layout`.
                unsafe { r.arena.alloc().deallocate(r.ptr, r.layout) };
                if let Some(m) = self.model(r.origin) {
                    m.free_any(r.held);
                }
            }
            Op::FreeOnThread { idx, raw } => {
                if raw && !self.raw.is_empty() {
                    COUNTS.bump(FREE_ON_THREAD);
                    let r = self.raw.swap_remove(idx as usize % self.raw.len());
                    assert!(holds(r.ptr.as_ptr(), r.layout.size(), r.byte));
                    let (addr, layout, arena) =
                        (r.ptr.as_ptr() as usize, r.layout, r.arena.clone());
                    std::thread::spawn(move || {
                        let p = NonNull::new(addr as *mut u8).unwrap();
                        // SAFETY: a live block of this allocator made with
                        // `layout`, handed to this thread.
                        unsafe { arena.alloc().deallocate(p, layout) };
                    })
                    .join()
                    .unwrap();
                    if let Some(m) = self.model(r.origin) {
                        m.free_elsewhere(r.held);
                    }
                } else if !raw && !self.owned.is_empty() {
                    COUNTS.bump(FREE_ON_THREAD);
                    let o = self.owned.swap_remove(idx as usize % self.owned.len());
                    assert!(holds(o.a.as_ptr(), o.a.capacity(), o.byte), "bytes changed");
                    std::thread::spawn(move || drop(o.a)).join().unwrap();
                    if let Some(m) = self.model(o.origin) {
                        m.free_elsewhere(o.held);
                    }
                }
            }
            Op::Export { idx, via_arena } => {
                if self.owned.is_empty() {
                    return;
                }
                COUNTS.bump(EXPORT);
                let o = self.owned.swap_remove(idx as usize % self.owned.len());
                let current_io = o.origin == self.origin(true);
                let (p, len) = (o.a.as_ptr(), o.a.len());
                let r = if via_arena {
                    self.io.arena.export(o.a)
                } else {
                    o.a.into_lease()
                };
                let ok = o.origin.io && (current_io || !via_arena);
                match r {
                    Ok(l) => {
                        assert!(ok, "exported {:?} (via arena: {via_arena})", o.origin);
                        assert_eq!((l.as_ptr(), l.len(), l.owners()), (p, len, 1));
                        let id = self.next_id;
                        self.next_id += 1;
                        let mut cap = 0;
                        if let Some(m) = self.model(o.origin) {
                            cap = m.cap_of(o.held);
                            m.leases += 1;
                            m.leased += cap;
                        }
                        self.leased.insert(
                            id,
                            Leased {
                                held: o.held,
                                cap,
                                origin: o.origin,
                                byte: o.byte,
                                len,
                            },
                        );
                        self.leases.push((l, id));
                    }
                    Err(a) => {
                        COUNTS.bump(EXPORT_REFUSED);
                        assert!(!ok, "refused to export {:?}", o.origin);
                        assert_eq!((a.as_ptr(), a.len()), (p, len));
                        self.owned.push(Owned { a, ..o });
                    }
                }
            }
            Op::Clone { idx } => {
                if self.leases.is_empty() {
                    return;
                }
                COUNTS.bump(CLONE);
                let (l, id) = &self.leases[idx as usize % self.leases.len()];
                let c = l.clone();
                let id = *id;
                self.leases.push((c, id));
            }
            Op::DropLease { idx } => {
                if self.leases.is_empty() {
                    return;
                }
                COUNTS.bump(DROP_LEASE);
                let (l, id) = self.leases.swap_remove(idx as usize % self.leases.len());
                let info = &self.leased[&id];
                assert_eq!(l.len(), info.len);
                assert!(
                    holds(l.as_ptr(), l.capacity(), info.byte),
                    "leased bytes changed"
                );
                let last = !self.leases.iter().any(|(_, j)| *j == id);
                assert_eq!(l.owners() == 1, last);
                drop(l);
                if last {
                    COUNTS.bump(LAST_LEASE);
                    let info = self.leased.remove(&id).unwrap();
                    if let Some(m) = self.model(info.origin) {
                        m.leases -= 1;
                        m.leased -= info.cap;
                        m.free_any(info.held);
                    }
                }
            }
            Op::RawRoundTrip { idx } => {
                if self.leases.is_empty() {
                    return;
                }
                COUNTS.bump(RAW_ROUNDTRIP);
                let i = idx as usize % self.leases.len();
                let (l, id) = self.leases.swap_remove(i);
                let owners = l.owners();
                let addr = l.as_ptr();
                let raw = l.into_raw();
                // SAFETY: `raw` is a live raw lease; one retain, one release.
                unsafe {
                    warmarena::handle::warmarena_lease_retain(raw);
                    warmarena::handle::warmarena_lease_release(raw);
                }
                // SAFETY: `raw` came from `into_raw` and is taken back once.
                let back = unsafe { IoLease::from_raw(raw) };
                assert_eq!((back.as_ptr(), back.owners()), (addr, owners));
                self.leases.push((back, id));
            }
            Op::Trim { io } => {
                COUNTS.bump(TRIM);
                let m = if io {
                    &mut self.io.model
                } else {
                    &mut self.exec.model
                };
                let exact = m.exact();
                let expect = m.trim();
                let got = if io {
                    self.io.arena.trim()
                } else {
                    self.exec.arena.trim()
                };
                if exact {
                    // Otherwise the model did not know what was retained;
                    // after the trim neither side retains anything.
                    assert_eq!(got, expect, "trimmed bytes");
                }
            }
            Op::SetCap { io, cap } => {
                COUNTS.bump(SET_CAP);
                let cap = cap.map(|c| c as usize % (16 << 20));
                if io {
                    self.io.arena.set_retention_cap(cap.unwrap_or(usize::MAX));
                    self.io.model.cap = cap;
                    self.io.model.enforce();
                } else {
                    self.exec.arena.set_retention_cap(cap.unwrap_or(usize::MAX));
                    self.exec.model.cap = cap;
                    self.exec.model.enforce();
                }
            }
            Op::Stream { io, size, count } => {
                COUNTS.bump(STREAMS);
                // 1 B to 2 KiB (the classes that spill), 64 to 2104 buffers.
                let (n, len) = (64 + 8 * count as usize, 1 + (size >> 3) as usize % 2048);
                let mut got: Vec<Option<Owned>> = (0..n)
                    .map(|_| Some(self.alloc_checked(io, len, 8).0))
                    .collect();
                COUNTS.add(STREAMED, n as u64);
                // Freed as they came, in reverse, or shuffled.
                let mut order: Vec<usize> = (0..n).collect();
                match size & 3 {
                    0 | 1 => {}
                    2 => order.reverse(),
                    _ => {
                        let mut x = u64::from(size) | 1;
                        for i in (1..n).rev() {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            order.swap(i, (x % (i as u64 + 1)) as usize);
                        }
                    }
                }
                for i in order {
                    let o = got[i].take().unwrap();
                    self.free_checked(o);
                }
            }
            Op::RunOnThread => {
                COUNTS.bump(RUN_ON_THREAD);
                let arena = self.exec.arena.clone();
                let before = arena.stats().heap_moves;
                let moved = std::thread::spawn(move || {
                    arena.begin_run();
                    arena.stats().heap_moves > before
                })
                .join()
                .unwrap();
                if moved {
                    COUNTS.bump(HEAP_MOVED_AWAY);
                }
                self.exec.model.boundary_elsewhere();
            }
            Op::DropArena { io } => {
                COUNTS.bump(DROP_ARENA);
                // The old arena lives on while its buffers do.
                if io {
                    self.io = Slot {
                        arena: IoArena::with_config(config()),
                        model: PolicyModel::default(),
                        epoch: self.io.epoch + 1,
                    };
                } else {
                    self.exec = Slot {
                        arena: ExecutionArena::with_config(config()),
                        model: PolicyModel::execution(),
                        epoch: self.exec.epoch + 1,
                    };
                }
            }
        }
    }

    fn check(&self) {
        if !self.exec.model.exact() || !self.io.model.exact() {
            COUNTS.bump(INEXACT_CHECKS);
        }
        self.exec.model.check(&self.exec.arena.stats(), "execution");
        self.io.model.check(&self.io.arena.stats(), "io");
        // No two live buffers overlap, across arenas and epochs.
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for o in &self.owned {
            spans.push((o.a.as_ptr() as usize, o.a.capacity()));
        }
        for r in &self.raw {
            spans.push((r.ptr.as_ptr() as usize, r.cap));
        }
        let mut seen = std::collections::HashSet::new();
        for (l, id) in &self.leases {
            if seen.insert(*id) {
                spans.push((l.as_ptr() as usize, l.capacity()));
                let owners = self.leases.iter().filter(|(_, j)| j == id).count();
                assert_eq!(l.owners(), owners, "lease owner count");
            }
        }
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {w:?}");
        }
    }

    fn finish(mut self) {
        for o in &self.owned {
            assert!(holds(o.a.as_ptr(), o.a.capacity(), o.byte));
        }
        for r in self.raw.drain(..) {
            assert!(holds(r.ptr.as_ptr(), r.layout.size(), r.byte));
            // SAFETY: a live block of this allocator made with `r.layout`.
            unsafe { r.arena.alloc().deallocate(r.ptr, r.layout) };
        }
    }
}

/// One operation from 6 bytes: an opcode and its arguments. A fixed width
/// keeps inputs easy to mutate (one byte flip changes one operation).
fn decode(c: &[u8]) -> Op {
    let a = c[1];
    let w = u32::from_le_bytes([c[2], c[3], c[4], c[5]]);
    let io = a & 1 == 1;
    let idx = c[2];
    match c[0] % 16 {
        0 => Op::Alloc {
            io,
            size: w,
            align_shift: a >> 1,
        },
        1 => Op::Stream {
            io,
            size: w,
            count: a >> 1,
        },
        2 => Op::AllocBad { io, which: a >> 1 },
        3 => Op::Resize { idx: a, len: w },
        4 => Op::RawAlloc {
            io,
            size: w,
            align_shift: a >> 1,
        },
        5 => Op::Grow {
            idx,
            add: w >> 8,
            align_shift: a,
        },
        6 => Op::Shrink { idx: a, to: w },
        7 => Op::Free { idx: a },
        8 => Op::RawFree { idx: a },
        9 => Op::Export {
            idx: a >> 1,
            via_arena: io,
        },
        10 => Op::Clone { idx: a },
        11 => Op::DropLease { idx: a },
        12 => Op::RawRoundTrip { idx: a },
        13 => match a % 4 {
            0 | 1 => Op::SetCap {
                io,
                cap: (w & 1 == 0).then_some(w >> 1),
            },
            2 => Op::Trim { io },
            _ => Op::DropArena { io },
        },
        14 => Op::FreeOnThread {
            idx: a >> 1,
            raw: io,
        },
        _ => Op::RunOnThread,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut w = World::new();
    for chunk in data.chunks_exact(6).take(256) {
        w.step(decode(chunk));
        w.check();
    }
    w.finish();
});
