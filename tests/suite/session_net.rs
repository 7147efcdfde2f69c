//! The example network end to end: outputs bit for bit equal to a plain
//! `Vec` reference; after one warm-up run, ten runs take no system call, page
//! fault, heap allocation or payload copy; and the execution arena's peak is
//! the graph's concurrent live set, computed here independently.

use crate::support::{assert_warm_runs_cost_nothing, measure, ten_net_runs};
use warmarena::session::{ArenaRun, Session};
use warmarena::size_class::{capacity, class_of};
use warmarena::{ExecutionArena, IoArena};
use warmarena_net::{bytes::as_bytes, nodes::*, Net, NetConfig};

fn cap(bytes: usize) -> usize {
    capacity(class_of(bytes).unwrap())
}

/// The execution arena's live bytes through one run, from the network's
/// schedule written out by hand: allocation (+) and release (−) events.
fn concurrent_live_set(cfg: &NetConfig) -> usize {
    let b = cfg.buffers();
    let size = |node: usize, what: &str| {
        cap(b
            .iter()
            .find(|(n, w, _)| *n == node && *w == what)
            .unwrap()
            .2)
    };
    let (c1, ws1, r1) = (
        size(CONV1, "c1"),
        size(CONV1, "workspace"),
        size(RELU1, "r1"),
    );
    let (c2, ws2, r2) = (
        size(CONV2, "c2"),
        size(CONV2, "workspace"),
        size(RELU2, "r2"),
    );
    let (sum, pooled, wsh) = (
        size(ADD, "sum"),
        size(HEAD, "pooled"),
        size(HEAD, "workspace"),
    );
    let events: [i64; 20] = [
        c1 as i64,
        ws1 as i64,
        -(ws1 as i64), // conv1
        r1 as i64,
        -(c1 as i64), // relu1 (c1 dies)
        c2 as i64,
        ws2 as i64,
        -(ws2 as i64), // conv2
        r2 as i64,
        -(c2 as i64), // relu2 (c2 dies)
        sum as i64,
        -(r1 as i64),
        -(r2 as i64), // add (r1, r2 die)
        pooled as i64,
        wsh as i64,
        -(wsh as i64),
        -(sum as i64), // head (sum dies)
        -(pooled as i64),
        0,
        0, // fc (pooled dies)
    ];
    let (mut live, mut peak) = (0i64, 0i64);
    for e in events {
        live += e;
        peak = peak.max(live);
    }
    assert_eq!(live, 0);
    peak as usize
}

#[test]
fn outputs_match_the_reference_bit_for_bit() {
    let net = Net::new(NetConfig::standard(), 11);
    let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
    let images: Vec<Vec<f32>> = (0..3).map(|seed| net.example_input(seed)).collect();
    let mut ctx = ArenaRun::new(&s);
    for image in &images {
        ctx.clear();
        let out = net.run(&mut ctx, image).unwrap();
        let (features, logits) = net.reference(image);
        assert_eq!(out.features.as_slice(), as_bytes(&features));
        assert_eq!(out.logits.as_slice(), as_bytes(&logits));
    }
}

#[test]
fn ten_warm_runs_cost_nothing_and_peak_is_the_live_set() {
    let cfg = NetConfig::standard();
    let net = Net::new(cfg, 5);
    let image = net.example_input(9);
    {
        // Code warm-up on throwaway arenas (text pages fault on first use).
        let t = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
        let mut ctx = ArenaRun::new(&t);
        ten_net_runs(&net, &mut ctx, &image, ArenaRun::clear);
        ten_net_runs(&net, &mut ctx, &image, ArenaRun::clear);
    }
    let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
    // The context is made once, before the runs (its value table is the
    // only allocation it ever makes).
    let mut ctx = ArenaRun::new(&s);
    drop(net.run(&mut ctx, &image).unwrap());
    assert_eq!(
        s.execution_arena().stats().peak_live_bytes,
        concurrent_live_set(&cfg)
    );
    let peak = assert_warm_runs_cost_nothing(&s, "10 warm runs of the example network", || {
        ten_net_runs(&net, &mut ctx, &image, ArenaRun::clear)
    });
    assert_eq!(
        peak,
        concurrent_live_set(&cfg),
        "peak = concurrent live set"
    );
}

#[test]
fn a_recycled_context_reuses_its_table_without_allocating() {
    let net = Net::new(NetConfig::tiny(), 1);
    let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
    let a = net.example_input(1);
    let mut ctx = ArenaRun::new(&s);
    drop(net.run(&mut ctx, &a).unwrap());
    let b = net.example_input(2);
    let (mut ctx2, cost, _) = measure(|| ctx.recycle());
    assert_eq!(cost.heap_calls, 0);
    let out = net.run(&mut ctx2, &b).unwrap();
    assert_eq!(out.logits.as_slice(), as_bytes(&net.reference(&b).1));
}
