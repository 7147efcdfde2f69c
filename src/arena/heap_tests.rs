//! Unit tests of the execution heap (`heap.rs`), under Miri too: repeated
//! runs at the same addresses, warm; any free space serving any size;
//! coalescing; what trim and the cap release.

use crate::{Allocation, ArenaConfig, ExecutionArena};

const K: usize = 1 << 10;

fn arena() -> ExecutionArena {
    ExecutionArena::with_config(ArenaConfig::default().huge_pages(false))
}

/// One run of a fixed mix: sizes from 64 KiB to 300 KiB at several
/// alignments, each written, freed a few steps later out of order.
fn one_run(a: &ExecutionArena, addrs: &mut Vec<usize>, warm: &mut Vec<bool>) {
    let sizes = [
        64 * K,
        100 * K,
        300 * K,
        70 * K + 5,
        128 * K,
        200 * K,
        90 * K,
    ];
    let aligns = [64, 4096, 16, 8192, 64, 65536, 256];
    let mut live: Vec<Option<Allocation>> = (0..sizes.len() * 3).map(|_| None).collect();
    for k in 0..live.len() {
        let (size, align) = (sizes[k % sizes.len()], aligns[k % aligns.len()]);
        let mut b = a.allocate(size, align).unwrap();
        assert_eq!(b.as_ptr() as usize % align, 0);
        // Miri interprets every byte written: there the two ends stand for
        // the whole (a write past the piece is caught either way).
        let bytes = b.as_mut_slice();
        if cfg!(miri) {
            let n = bytes.len();
            bytes[..64].fill(k as u8);
            bytes[n - 64..].fill(k as u8);
        } else {
            bytes.fill(k as u8);
        }
        addrs.push(b.as_ptr() as usize);
        warm.push(b.served_warm());
        live[k] = Some(b);
        for (j, slot) in live.iter_mut().enumerate().take(k + 1) {
            if (j + 1 + (j * 5) % 4).min(sizes.len() * 3 - 1) == k {
                *slot = None;
            }
        }
        assert_eq!(a.check_invariants(), Ok(()), "step {k}");
    }
}

#[test]
fn a_repeated_run_takes_the_same_addresses_warm() {
    let a = arena();
    let (mut first, mut warm) = (vec![], vec![]);
    one_run(&a, &mut first, &mut warm);
    let after_first = a.stats();
    assert_eq!(after_first.live_bytes, 0);
    for run in 0..3 {
        let (mut again, mut warm) = (vec![], vec![]);
        one_run(&a, &mut again, &mut warm);
        assert_eq!(again, first, "run {run}: other addresses");
        assert!(warm.iter().all(|&w| w), "run {run}: {warm:?}");
        let s = a.stats();
        assert_eq!(s.os.syscalls(), after_first.os.syscalls(), "run {run}");
        assert_eq!(s.cold_allocations, after_first.cold_allocations);
        assert_eq!(s.retained_bytes, after_first.retained_bytes);
    }
}

#[test]
fn any_free_space_serves_any_size() {
    let a = arena();
    let big = a.allocate(512 * K, 64).unwrap();
    let keep = a.allocate(64 * K, 64).unwrap();
    let at = big.as_ptr() as usize;
    drop(big);
    assert_eq!(a.stats().retained_bytes, 512 * K);
    // Two other sizes, neither of the big one's class: both inside it, warm.
    let x = a.allocate(256 * K, 64).unwrap();
    let y = a.allocate(200 * K, 64).unwrap();
    for b in [&x, &y] {
        let p = b.as_ptr() as usize;
        assert!(b.served_warm());
        assert!(p >= at && p + b.capacity() <= at + 512 * K);
    }
    assert_eq!(a.stats().retained_bytes, 56 * K);
    assert_eq!(a.stats().cold_allocations, 2);
    assert_eq!(a.check_invariants(), Ok(()));
    drop((x, y, keep));
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn freed_neighbours_coalesce_into_one_extent() {
    let a = arena();
    let bufs: Vec<_> = (0..3).map(|_| a.allocate(256 * K, 64).unwrap()).collect();
    let keep = a.allocate(64 * K, 64).unwrap();
    let at = bufs[0].as_ptr() as usize;
    let mut bufs = bufs.into_iter().map(Some).collect::<Vec<_>>();
    bufs[0] = None;
    bufs[2] = None;
    bufs[1] = None;
    assert_eq!(a.check_invariants(), Ok(()));
    let whole = a.allocate(768 * K, 64).unwrap();
    assert!(whole.served_warm());
    assert_eq!(whole.as_ptr() as usize, at);
    drop((whole, keep));
}

#[test]
fn trim_releases_the_top_and_idle_segments_but_not_holes() {
    let a = arena();
    let x = a.allocate(128 * K, 64).unwrap();
    let y = a.allocate(256 * K, 64).unwrap();
    let z = a.allocate(64 * K, 64).unwrap();
    drop(y);
    // A hole between two live buffers stays retained.
    assert_eq!(a.trim(), 0);
    assert_eq!(a.stats().retained_bytes, 256 * K);
    assert_eq!(a.stats().retained_buffers, 1);
    // Its upper neighbour freed: the extent reaches the top and goes back.
    drop(z);
    assert_eq!(a.trim(), 320 * K);
    let s = a.stats();
    assert_eq!((s.retained_bytes, s.retained_buffers), (0, 0));
    assert_eq!(s.os.page_releases, 1);
    // The last buffer freed: the segment is idle, released whole.
    drop(x);
    assert_eq!(a.trim(), 128 * K);
    assert_eq!(a.stats().retained_bytes, 0);
    // Served again, cold, from the same segment.
    let again = a.allocate(128 * K, 64).unwrap();
    assert!(!again.served_warm());
    assert_eq!(a.stats().os.maps, 1);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn the_cap_releases_free_memory_above_live_buffers() {
    let a = ExecutionArena::with_config(
        ArenaConfig::default()
            .huge_pages(false)
            .retention_cap(100 * K),
    );
    let x = a.allocate(64 * K, 64).unwrap();
    let y = a.allocate(256 * K, 64).unwrap();
    drop(y);
    // 256 KiB above the live buffer: over the cap, released.
    let s = a.stats();
    assert_eq!(
        (s.retained_bytes, s.evictions, s.evicted_bytes),
        (0, 1, 256 * K)
    );
    let y = a.allocate(256 * K, 64).unwrap();
    assert!(!y.served_warm());
    drop(x);
    // A 64 KiB hole below a live buffer fits the cap: kept.
    assert_eq!(a.stats().retained_bytes, 64 * K);
    a.set_retention_cap(0);
    // A hole is not releasable: the cap stays exceeded by it.
    assert_eq!(a.stats().retained_bytes, 64 * K);
    drop(y);
    assert_eq!(a.stats().retained_bytes, 0);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_parked_last_buffer_behaves_as_merged() {
    let a = arena();
    let x = a.allocate(256 * K, 64).unwrap();
    let at = x.as_ptr() as usize;
    drop(x);
    // Parked: one retained extent as far as anyone can tell.
    let s = a.stats();
    assert_eq!((s.retained_bytes, s.retained_buffers), (256 * K, 1));
    assert_eq!(a.check_invariants(), Ok(()));
    // The same length comes back from it, warm.
    let y = a.allocate(256 * K - 100, 64).unwrap();
    assert_eq!((y.as_ptr() as usize, y.served_warm()), (at, true));
    drop(y);
    // Another length: merged first, then placed as on a merged heap.
    let z = a.allocate(128 * K, 64).unwrap();
    assert_eq!((z.as_ptr() as usize, z.served_warm()), (at, true));
    let w = a.allocate(256 * K, 64).unwrap();
    assert_eq!(w.as_ptr() as usize, at + 128 * K);
    assert!(!w.served_warm(), "reaches above the mark");
    assert_eq!(a.check_invariants(), Ok(()));
    drop((z, w));
    assert_eq!(a.trim(), 384 * K);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_heap_segment_names_its_arena_only_as_far_as_its_mark() {
    use crate::arena::owners::{self, Owner, GRANULE};
    let a = arena();
    let b = a.allocate(70 * K, 64).unwrap();
    let p = b.as_ptr() as usize;
    let (base, len, owned, me) = {
        let st = a.core.lock();
        let g = st.heap.segs[0];
        (g.base, g.len, g.owned, st.owner)
    };
    // The piece's granules, and no more than the granules its mark
    // reaches: a 1 GiB segment is not registered whole when it is made.
    assert_eq!(owned, GRANULE * 2, "72 KiB marked: two granules");
    assert!(owners::lookup(p) == me && owners::lookup(base + GRANULE) == me);
    assert!(owners::lookup(base + owned) == Owner::NONE);
    assert!(owners::lookup(base + len - GRANULE) == Owner::NONE);
    // A piece above the mark raises it, and registers what it reaches.
    let far = a.allocate(300 * K, 64).unwrap();
    let end = far.as_ptr() as usize + 300 * K;
    let owned = a.core.lock().heap.segs[0].owned;
    assert_eq!(owned, (end - base).next_multiple_of(GRANULE));
    assert!(owners::lookup(end - 1) == me);
    // The arena frees by address what it handed out there.
    drop(b);
    drop(far);
    assert_eq!(a.check_invariants(), Ok(()));
}
