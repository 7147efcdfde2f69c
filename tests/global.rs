//! The scoped global allocator, installed: its own test binary, because a
//! process has one global allocator. The backing allocator
//! (`CountingSystem`) counts the calls each thread makes to it, so tests can
//! assert "no system allocation".

use std::alloc::Layout;
use std::collections::HashMap;
use std::sync::mpsc;
use warmarena::global::{self, CountingSystem, ScopedGlobal};
use warmarena::ExecutionArena;

#[global_allocator]
static GLOBAL: ScopedGlobal<CountingSystem> = ScopedGlobal::over(CountingSystem);

fn system_calls() -> u64 {
    CountingSystem::calls()
}

fn live(arena: &ExecutionArena) -> usize {
    arena.stats().live_buffers
}

trait Shape {
    fn area(&self) -> f64;
}
struct Sq(f64);
impl Shape for Sq {
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}

struct Values {
    v: Vec<u64>,
    s: String,
    m: HashMap<String, Vec<u32>>,
    b: Box<dyn Shape + Send>,
}

fn build(n: u64) -> Values {
    let v: Vec<u64> = (0..n).collect();
    let s = format!("value number {n} with some text");
    let mut m = HashMap::new();
    for i in 0..n as u32 {
        m.insert(format!("key{i}"), vec![i; (i % 7) as usize + 1]);
    }
    Values {
        v,
        s,
        m,
        b: Box::new(Sq(n as f64)),
    }
}

fn check(x: &Values, n: u64) {
    assert_eq!(x.v.iter().sum::<u64>(), n * (n - 1) / 2);
    assert_eq!(x.s, format!("value number {n} with some text"));
    assert_eq!(x.m.len(), n as usize);
    assert_eq!(x.m["key3"], vec![3; 4]);
    assert_eq!(x.b.area(), (n * n) as f64);
}

#[test]
fn collections_built_in_scope_and_freed_outside() {
    let arena = ExecutionArena::new();
    let before = global::stats();
    let x = global::scope(&arena, || build(500));
    assert!(live(&arena) >= 4, "{:?}", arena.stats());
    check(&x, 500);
    drop(x);
    assert_eq!(live(&arena), 0);
    let after = global::stats();
    assert!(after.returned_outside_scope > before.returned_outside_scope);
}

/// Warm tiny objects inside a scope (boxes, short strings, small vectors
/// made and dropped) are served by this thread's cache: the arena's lock
/// is not taken, only the `stats` read that counts it.
#[test]
fn warm_scoped_tiny_objects_take_no_arena_lock() {
    let arena = ExecutionArena::new();
    let work = || {
        for i in 0..2_000u64 {
            let b = Box::new(i);
            let s = format!("{i}");
            let v: Vec<u32> = (0..(i % 9) as u32).collect();
            std::hint::black_box((&b, &s, &v));
        }
    };
    global::scope(&arena, work);
    let before = arena.stats().locked_operations;
    global::scope(&arena, work);
    let after = arena.stats();
    assert_eq!(after.locked_operations - before - 1, 0, "{after:?}");
    assert_eq!(after.live_buffers, 0);
}

#[test]
fn freed_on_another_thread() {
    let arena = ExecutionArena::new();
    let x = global::scope(&arena, || build(300));
    let n = live(&arena);
    assert!(n > 0);
    std::thread::spawn(move || {
        check(&x, 300);
        drop(x);
    })
    .join()
    .unwrap();
    assert_eq!(live(&arena), 0);
}

#[test]
fn realloc_inside_and_outside_the_scope() {
    let arena = ExecutionArena::new();
    let g = global::enter(&arena);
    let mut v: Vec<u8> = Vec::with_capacity(10);
    for i in 0..100_000u32 {
        v.push(i as u8);
    }
    let calls = system_calls();
    let s = arena.stats();
    assert!(
        s.live_buffers == 1,
        "grown in place or moved, one buffer: {s:?}"
    );
    drop(g);
    // Outside the scope, growth moves the bytes to the system allocator.
    for i in 100_000..400_000u32 {
        v.push(i as u8);
    }
    assert!(system_calls() > calls);
    assert_eq!(
        live(&arena),
        0,
        "the arena buffer went back when the Vec moved"
    );
    assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
    // And a system buffer grown inside a scope stays a system buffer.
    let _g = global::enter(&arena);
    v.extend(std::iter::repeat_n(1u8, 1 << 20));
    assert_eq!(live(&arena), 0);
}

#[test]
fn a_vec_grown_in_its_scope_stops_moving_once_in_the_heap() {
    let arena = ExecutionArena::new();
    let g = global::enter(&arena);
    let before = (global::stats(), arena.stats());
    let mut v: Vec<u8> = Vec::new();
    let (mut at, mut moves_in_heap) = (0, 0);
    for i in 0..(4u32 << 20) {
        v.push(i as u8);
        let now = v.as_ptr() as usize;
        if now != at && v.capacity() > 128 << 10 {
            moves_in_heap += 1;
        }
        at = now;
    }
    let after = (global::stats(), arena.stats());
    drop(g);
    assert_eq!(
        moves_in_heap, 0,
        "a heap piece with room above grows in place"
    );
    // Copies only below 64 KiB (8 B, 16 B ... 32 KiB), then one into the heap.
    let copied = after.1.copied_bytes - before.1.copied_bytes;
    assert!(copied < 64 << 10, "{copied} bytes copied");
    assert!(after.0.realloc_in_place - before.0.realloc_in_place >= 6);
    assert_eq!(after.1.live_buffers, 1);
    assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
}

#[test]
fn shrink_to_fit_in_its_scope_gives_pages_back_to_the_heap() {
    let arena = ExecutionArena::new();
    let g = global::enter(&arena);
    let mut v: Vec<u8> = Vec::new();
    for i in 0..(3u32 << 20) {
        v.push(i as u8);
    }
    let grown = arena.stats().live_bytes;
    let at = v.as_ptr();
    v.shrink_to_fit();
    let shrunk = arena.stats().live_bytes;
    drop(g);
    assert_eq!(v.as_ptr(), at, "shrunk in place");
    assert!(grown >= 4 << 20, "{grown}");
    assert!(
        shrunk < (3 << 20) + (8 << 10),
        "{shrunk} live after shrink_to_fit"
    );
    assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
}

#[test]
fn nested_scopes_over_two_arenas() {
    let a = ExecutionArena::new();
    let b = ExecutionArena::new();
    let ga = global::enter(&a);
    let in_a = build(50);
    let (in_b, live_b) = {
        let _gb = global::enter(&b);
        let x = build(60);
        (x, live(&b))
    };
    let in_a2 = vec![1u32; 1000];
    drop(ga);
    assert!(live_b > 0);
    assert_eq!(live(&b), live_b, "nothing of b's was freed");
    assert!(live(&a) >= 5);
    check(&in_a, 50);
    check(&in_b, 60);
    drop((in_a, in_b, in_a2));
    assert_eq!((live(&a), live(&b)), (0, 0));
}

thread_local! {
    static HELD: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[test]
fn thread_exits_holding_scoped_memory() {
    let arena = ExecutionArena::new();
    let a2 = arena.clone();
    // A bounded channel: its buffer is allocated here, outside the scope.
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let _g = global::enter(&a2);
        // A thread-local freed by its destructor at thread exit, after the scope.
        HELD.with(|h| h.borrow_mut().extend((0..100).map(|i| format!("held {i}"))));
        // And memory that outlives the thread on another one.
        tx.send(vec![7u16; 5000]).unwrap();
        drop(a2); // the scope still holds the arena
    })
    .join()
    .unwrap();
    let v = rx.recv().unwrap();
    assert_eq!(live(&arena), 1, "only the sent Vec is still live");
    assert!(v.iter().all(|&x| x == 7));
    drop(v);
    assert_eq!(live(&arena), 0);
}

#[test]
fn dropping_the_last_handle_with_memory_outstanding() {
    let arena = ExecutionArena::new();
    let x = global::scope(&arena, || build(200));
    drop(arena);
    check(&x, 200);
    drop(x); // the last buffer frees the arena
}

#[test]
fn warm_runs_make_no_system_allocation() {
    let arena = ExecutionArena::new();
    let work = || {
        let x = build(400);
        check(&x, 400);
        let mut big: Vec<f32> = Vec::new();
        big.resize(300_000, 1.5);
        assert_eq!(big.len(), 300_000);
    };
    global::scope(&arena, work);
    let cold = arena.stats();
    let calls = system_calls();
    for _ in 0..10 {
        global::scope(&arena, work);
    }
    let warm = arena.stats();
    assert_eq!(system_calls(), calls, "system allocations on warm runs");
    assert_eq!(warm.cold_allocations, cold.cold_allocations);
    assert_eq!(warm.os, cold.os, "system calls on warm runs");
    assert_eq!(warm.live_buffers, 0);
}

#[test]
fn threads_share_memory_across_scopes() {
    let arenas: Vec<ExecutionArena> = (0..4).map(|_| ExecutionArena::new()).collect();
    let (tx, rx) = mpsc::channel::<Vec<u64>>();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (t, arena) in arenas.iter().enumerate() {
            let tx = tx.clone();
            handles.push(s.spawn(move || {
                let _g = global::enter(arena);
                for i in 0..200u64 {
                    tx.send(vec![i + t as u64; 64 + (i as usize % 300)])
                        .unwrap();
                }
            }));
        }
        drop(tx);
        let other = ExecutionArena::new();
        let _g = global::enter(&other);
        let mut got = 0;
        // By value: the channel (blocks allocated by the senders in their
        // scopes) is freed when the loop ends.
        for v in rx {
            assert!(v.iter().all(|&x| x == v[0]));
            got += 1;
        }
        assert_eq!(got, 800);
        // Join the OS threads, so their thread-local destructors have run.
        for h in handles {
            h.join().unwrap();
        }
    });
    for a in &arenas {
        assert_eq!(live(a), 0);
    }
}

#[test]
fn arena_metadata_growth_inside_a_scope_does_not_reenter() {
    // The arena's own block table and address index grow through the
    // global allocator while the arena lock is held: inside a scope of that
    // very arena, they must go to the system, not back into the arena.
    let arena = ExecutionArena::new();
    let _g = global::enter(&arena);
    let before = global::stats();
    let held: Vec<_> = (0..5000)
        .map(|i| arena.allocate(64 + (i % 50) * 16, 16).unwrap())
        .collect();
    let boxed: Vec<Box<[u8; 40]>> = (0..5000).map(|_| Box::new([1; 40])).collect();
    let after = global::stats();
    assert!(after.metadata_allocs > before.metadata_allocs);
    assert_eq!(
        live(&arena),
        5000 + 5000 + 2,
        "buffers, boxes and the two Vecs"
    );
    drop((held, boxed));
    assert_eq!(live(&arena), 0);
}

#[test]
fn an_arena_made_and_dropped_inside_another_scope() {
    let outer = ExecutionArena::new();
    let _g = global::enter(&outer);
    for _ in 0..3 {
        let inner = ExecutionArena::new();
        let x = global::scope(&inner, || build(100));
        check(&x, 100);
        drop(inner);
        drop(x);
    }
    assert_eq!(
        live(&outer),
        0,
        "arena bodies and metadata are not scoped memory"
    );
}

#[test]
fn alignment_above_the_arena_falls_back() {
    let arena = ExecutionArena::new();
    let l = Layout::from_size_align(4096, 4 << 20).unwrap();
    let before = global::stats();
    let _g = global::enter(&arena);
    // SAFETY: non-zero layout, freed with it.
    unsafe {
        // black_box: a release build may otherwise drop the unused pair.
        let p = std::hint::black_box(std::alloc::alloc(l));
        assert!(!p.is_null() && p as usize % (4 << 20) == 0);
        std::alloc::dealloc(p, l);
    }
    assert!(global::stats().fallback_allocs > before.fallback_allocs);
    assert_eq!(arena.stats().cold_allocations, 0);
}

/// A buffer shrunk in place by `realloc` is freed with its new, smaller
/// layout, which names a smaller class than its run's: the free returns it
/// to its own class, not to the one the layout names.
#[test]
fn a_buffer_shrunk_in_place_goes_back_to_its_own_class() {
    let arena = ExecutionArena::new();
    let _g = global::enter(&arena);
    let big = Layout::from_size_align(1000, 8).unwrap();
    let small = Layout::from_size_align(10, 8).unwrap();
    // The compiler may drop an allocation whose pointer only reaches its
    // free: every pointer goes through `black_box`.
    let bb = std::hint::black_box::<*mut u8>;
    // SAFETY: non-zero layouts; every buffer is freed once with the layout
    // it has at that moment (after the realloc, `small`).
    unsafe {
        // The thread's cache made, both classes carved once.
        let (a, b) = (bb(std::alloc::alloc(small)), bb(std::alloc::alloc(big)));
        std::alloc::dealloc(a, small);
        std::alloc::dealloc(b, big);
        assert_eq!(live(&arena), 0);
        // A live buffer of the small class: its bin has credit for a free.
        let held = bb(std::alloc::alloc(small));
        let p = bb(std::alloc::alloc(big));
        let q = bb(std::alloc::realloc(p, big, small.size()));
        assert_eq!(q, p, "shrunk in place");
        std::alloc::dealloc(p, small);
        assert_eq!(live(&arena), 1);
        let other = bb(std::alloc::alloc(small));
        assert_ne!(other, p, "served to the class the layout named");
        let again = bb(std::alloc::alloc(big));
        assert_eq!(again, p, "back in its own class");
        std::alloc::dealloc(other, small);
        std::alloc::dealloc(again, big);
        std::alloc::dealloc(held, small);
    }
    assert_eq!(live(&arena), 0);
}
