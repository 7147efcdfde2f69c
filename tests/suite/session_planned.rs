//! Planned runs (`PlannedRun`): the example network runs on one
//! execution-arena block of the plan's height, bit for bit equal to the
//! reference; values live at one time get disjoint windows; ten warm runs
//! cost no system call, heap allocation or page fault; the execution
//! arena's peak is the height's class capacity.

use crate::support::{assert_warm_runs_cost_nothing, ten_net_runs};
use warmarena::planner::validate;
use warmarena::planner::ViewMap;
use warmarena::session::{Graph, OutputBuffer, PlannedRun, RunMemory, Session, SessionError};
use warmarena::size_class::{capacity, class_of};
use warmarena::{ExecutionArena, IoArena};
use warmarena_net::{bytes::as_bytes, nodes::*, Net, NetConfig};

fn prepared<'s, 'i>(s: &'s Session, cfg: NetConfig) -> PlannedRun<'s, 'i> {
    let mut ctx = PlannedRun::new(s).unwrap();
    ctx.prepare(|v| cfg.value_bytes(v), |n| cfg.workspace_bytes(n))
        .unwrap();
    ctx
}

#[test]
fn planned_outputs_match_the_reference_bit_for_bit() {
    for cfg in [NetConfig::tiny(), NetConfig::standard()] {
        let net = Net::new(cfg, 11);
        let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
        let images: Vec<Vec<f32>> = (0..3).map(|seed| net.example_input(seed)).collect();
        let mut ctx = prepared(&s, cfg);
        for image in &images {
            ctx.clear();
            let out = net.run(&mut ctx, image).unwrap();
            let (features, logits) = net.reference(image);
            assert_eq!(out.features.as_slice(), as_bytes(&features));
            assert_eq!(out.logits.as_slice(), as_bytes(&logits));
            assert_eq!(out.features.kind(), warmarena::ArenaKind::Io);
        }
        assert_eq!(s.execution_arena().stats().live_bytes, 0);
    }
}

#[test]
fn windows_of_values_live_together_never_overlap() {
    let cfg = NetConfig::standard();
    let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
    let ctx = prepared(&s, cfg);
    let plan = ctx.plan().unwrap();
    let size = |v| ctx.planned_bytes(v);
    assert_eq!(
        validate(ctx.planner_graph(), &ViewMap::new(), plan, size),
        Ok(())
    );
    // Independently: windows as (first node, last node, offset, bytes),
    // from the schedule written out by hand.
    let b = |name: &str| cfg.value_bytes(name).unwrap();
    let o = |name: &str| ctx.offset_of(name).unwrap();
    let ws = |n: usize| {
        (
            n,
            n,
            ctx.workspace_offset(n).unwrap(),
            cfg.workspace_bytes(n),
        )
    };
    let windows = [
        (CONV1, RELU1, o("c1"), b("c1")),
        ws(CONV1),
        (RELU1, ADD, o("r1"), b("r1")),
        (CONV2, RELU2, o("c2"), b("c2")),
        ws(CONV2),
        (RELU2, ADD, o("r2"), b("r2")),
        (ADD, HEAD, o("sum"), b("sum")),
        (HEAD, FC, o("pooled"), b("pooled")),
        ws(HEAD),
    ];
    for (i, x) in windows.iter().enumerate() {
        assert!(x.2 + x.3 <= plan.height);
        for y in &windows[i + 1..] {
            let together = x.0 <= y.1 && y.0 <= x.1;
            let apart = x.2 + x.3 <= y.2 || y.2 + y.3 <= x.2;
            assert!(!together || apart, "{x:?} and {y:?} overlap");
        }
    }
    // Declared outputs are not in the block.
    assert_eq!(ctx.offset_of("features"), None);
    assert_eq!(ctx.offset_of("logits"), None);
    // The block is far below one buffer per value.
    assert!(plan.height < plan.naive_bytes);
}

#[test]
fn ten_warm_planned_runs_cost_nothing_and_peak_is_the_height() {
    let cfg = NetConfig::standard();
    let net = Net::new(cfg, 5);
    let image = net.example_input(9);
    {
        // Code warm-up on throwaway arenas (text pages fault on first use).
        let t = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
        let mut ctx = prepared(&t, cfg);
        ten_net_runs(&net, &mut ctx, &image, PlannedRun::clear);
        ten_net_runs(&net, &mut ctx, &image, PlannedRun::clear);
    }
    let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
    let mut ctx = prepared(&s, cfg);
    let height = ctx.plan().unwrap().height;
    let block = capacity(class_of(height).unwrap());
    drop(net.run(&mut ctx, &image).unwrap());
    assert_eq!(s.execution_arena().stats().peak_live_bytes, block);
    let peak =
        assert_warm_runs_cost_nothing(&s, "10 warm planned runs of the example network", || {
            ten_net_runs(&net, &mut ctx, &image, PlannedRun::clear)
        });
    assert_eq!(peak, block, "peak = the plan height's class");
}

#[test]
fn a_repeated_shape_reuses_its_plan() {
    let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
    let (a, b) = (NetConfig::tiny(), NetConfig::standard());
    let images: Vec<(Net, Vec<f32>)> = [a, b]
        .iter()
        .map(|&cfg| {
            let net = Net::new(cfg, 3);
            let image = net.example_input(4);
            (net, image)
        })
        .collect();
    let mut ctx = PlannedRun::new(&s).unwrap();
    for (cfg, (net, image)) in [a, b, a, b, a].into_iter().zip(images.iter().cycle()) {
        ctx.prepare(|v| cfg.value_bytes(v), |n| cfg.workspace_bytes(n))
            .unwrap();
        let out = net.run(&mut ctx, image).unwrap();
        assert_eq!(out.logits.as_slice(), as_bytes(&net.reference(image).1));
        ctx.clear();
    }
    assert_eq!(ctx.cache_stats(), (3, 2)); // hits, misses
}

/// x -> a -> t -> b -> y (declared output), on fresh arenas.
fn chain_session() -> Session {
    let g = Graph::new()
        .input("x")
        .node("a", &["x"], &["t"])
        .node("b", &["t"], &["y"])
        .output("y");
    Session::new(&g, ExecutionArena::new(), IoArena::new()).unwrap()
}

#[test]
fn windows_are_checked_against_the_plan_and_the_schedule() {
    let s = chain_session();
    let mut ctx = PlannedRun::new(&s).unwrap();
    let x = [1u8; 64];
    assert_eq!(
        ctx.output(0, 0, 64, 8).unwrap_err(),
        SessionError::NotPrepared
    );
    ctx.prepare(|_| Some(64), |n| if n == 0 { 128 } else { 0 })
        .unwrap();
    ctx.borrow_input("x", &x).unwrap();
    // Out of order, too large, over-aligned.
    assert!(matches!(
        ctx.output(1, 0, 64, 8),
        Err(SessionError::OutOfOrder {
            node: 1,
            expected: 0
        })
    ));
    assert!(matches!(
        ctx.output(0, 0, 65, 8),
        Err(SessionError::OutsidePlan { .. })
    ));
    assert!(matches!(
        ctx.output(0, 0, 64, 128),
        Err(SessionError::OutsidePlan { .. })
    ));
    let mut t = ctx.output(0, 0, 64, 8).unwrap();
    let ws = ctx.workspace(0, 128, 64).unwrap();
    assert!(matches!(
        ctx.workspace(0, 8, 8),
        Err(SessionError::AlreadySet(_))
    ));
    t.as_mut_slice().fill(3);
    ctx.commit(0, 0, t).unwrap();
    // The workspace window is still held: node 0 cannot finish.
    assert!(matches!(
        ctx.finish(0),
        Err(SessionError::WindowsOutstanding(_))
    ));
    assert!(matches!(
        ctx.prepare(|_| Some(64), |_| 0),
        Err(SessionError::RunInProgress)
    ));
    drop(ws);
    ctx.finish(0).unwrap();
    let mut y = ctx.output(1, 0, 64, 8).unwrap();
    assert!(!y.is_window());
    y.as_mut_slice().copy_from_slice(ctx.input(1, 0).unwrap());
    ctx.commit(1, 0, y).unwrap();
    ctx.finish(1).unwrap();
    assert_eq!(ctx.take_output("y").unwrap().as_slice(), &[3u8; 64]);
    assert_eq!(s.execution_arena().stats().live_bytes, 0);
}

#[test]
fn a_window_held_past_its_run_keeps_its_own_block() {
    let s = chain_session();
    let mut ctx = PlannedRun::new(&s).unwrap();
    ctx.prepare(|_| Some(64), |_| 0).unwrap();
    let mut stale = ctx.output(0, 0, 64, 8).unwrap();
    ctx.clear();
    let fresh = ctx.output(0, 0, 64, 8).unwrap();
    assert_ne!(stale.as_ptr(), fresh.as_ptr());
    stale.as_mut_slice().fill(9);
    // A window of another run is refused.
    assert!(matches!(
        ctx.commit(0, 0, stale),
        Err(SessionError::WrongArena { .. })
    ));
    drop(fresh);
    ctx.clear();
    drop(ctx);
    assert_eq!(s.execution_arena().stats().live_bytes, 0);
}
