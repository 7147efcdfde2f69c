//! Routing: every allocation comes from the arena the session chose for its
//! slot, in both mixed-output orders, with workspaces always in the
//! execution arena — rule 9 included.

use warmarena::session::{ArenaRun, Graph, Session, SessionError};
use warmarena::{ArenaKind, ExecutionArena, IoArena};

fn session(g: &Graph) -> Session {
    Session::new(g, ExecutionArena::new(), IoArena::new()).unwrap()
}

#[test]
fn declared_output_in_slot_0_and_intermediate_in_slot_1() {
    let g = Graph::new()
        .input("x")
        .node("mixed", &["x"], &["out", "mid"])
        .node("tail", &["mid"], &["out2"])
        .output("out")
        .output("out2");
    let s = session(&g);
    let x = [1u8; 64];
    let mut ctx = ArenaRun::new(&s);
    ctx.borrow_input("x", &x).unwrap();
    let a = ctx.output(0, 0, 1000, 64).unwrap();
    let b = ctx.output(0, 1, 1000, 64).unwrap();
    let ws = ctx.temporary(5000, 64).unwrap();
    assert_eq!(a.kind(), ArenaKind::Io);
    assert_eq!(b.kind(), ArenaKind::Execution);
    assert_eq!(
        ws.kind(),
        ArenaKind::Execution,
        "rule 9: a workspace is execution memory"
    );
    drop(ws);
    ctx.commit(0, 0, a).unwrap();
    ctx.commit(0, 1, b).unwrap();
    ctx.finish(0).unwrap();
    let c = ctx.output(1, 0, 10, 8).unwrap();
    assert_eq!(c.kind(), ArenaKind::Io);
    ctx.commit(1, 0, c).unwrap();
    ctx.finish(1).unwrap();
    assert_eq!(
        s.execution_arena().stats().live_bytes,
        0,
        "mid was freed at its last use"
    );
    assert_eq!(
        s.io_arena().stats().copies + s.execution_arena().stats().copies,
        0
    );
    let out = ctx.take_output("out").unwrap();
    assert_eq!(out.kind(), ArenaKind::Io);
}

#[test]
fn intermediate_in_slot_0_and_declared_output_in_slot_1() {
    let g = Graph::new()
        .input("x")
        .node("mixed", &["x"], &["mid", "out"])
        .node("tail", &["mid"], &["out2"])
        .output("out")
        .output("out2");
    let s = session(&g);
    assert_eq!(s.slot_role(0, 0), Some(ArenaKind::Execution));
    assert_eq!(s.slot_role(0, 1), Some(ArenaKind::Io));
    let ctx = ArenaRun::new(&s);
    assert_eq!(
        ctx.output(0, 0, 100, 8).unwrap().kind(),
        ArenaKind::Execution
    );
    assert_eq!(ctx.output(0, 1, 100, 8).unwrap().kind(), ArenaKind::Io);
    assert_eq!(ctx.temporary(100, 8).unwrap().kind(), ArenaKind::Execution);
    assert!(matches!(
        ctx.output(0, 2, 100, 8),
        Err(SessionError::NoSuchSlot { .. })
    ));
    assert!(matches!(
        ctx.output(9, 0, 100, 8),
        Err(SessionError::UnknownNode(9))
    ));
}

#[test]
fn committing_a_buffer_from_the_wrong_arena_is_refused_without_copying() {
    let g = Graph::new()
        .input("x")
        .node("n", &["x"], &["y", "t"])
        .node("m", &["t"], &["z"])
        .output("y")
        .output("z");
    let s = session(&g);
    let mut ctx = ArenaRun::new(&s);
    let exec_buf = ctx.output(0, 1, 64, 8).unwrap();
    let err = ctx.commit(0, 0, exec_buf).unwrap_err();
    assert_eq!(
        err,
        SessionError::WrongArena {
            value: "y".into(),
            expected: Some(ArenaKind::Io)
        }
    );
    // Another session's arenas are other arenas, even of the same kind.
    let other = session(&g);
    let foreign = ArenaRun::new(&other).output(0, 0, 64, 8).unwrap();
    assert!(matches!(
        ctx.commit(0, 0, foreign),
        Err(SessionError::WrongArena { .. })
    ));
    let ok = ctx.output(0, 0, 64, 8).unwrap();
    ctx.commit(0, 0, ok).unwrap();
    let again = ctx.output(0, 0, 64, 8).unwrap();
    assert_eq!(
        ctx.commit(0, 0, again).unwrap_err(),
        SessionError::AlreadySet("y".into())
    );
}

#[test]
fn sessions_share_arenas() {
    let g = Graph::new()
        .input("x")
        .node("n", &["x"], &["y"])
        .output("y");
    let exec = ExecutionArena::new();
    let io = IoArena::new();
    let a = Session::new(&g, exec.clone(), io.clone()).unwrap();
    let b = Session::new(&g, exec.clone(), io.clone()).unwrap();
    drop(ArenaRun::new(&a).output(0, 0, 4096, 8).unwrap());
    let reused = ArenaRun::new(&b).output(0, 0, 4096, 8).unwrap();
    assert!(
        reused.served_warm(),
        "the second session reuses the first one's buffer"
    );
    assert!(a.io_arena().same_arena(b.io_arena()));
}

#[test]
fn subgraph_values_use_the_child_arena_and_outputs_cross_back_without_copy() {
    let outer = Graph::new()
        .input("x")
        .node("loop", &["x"], &["y", "carry"])
        .node("after", &["carry"], &["z"])
        .output("y")
        .output("z");
    let parent = session(&outer);
    let body = Graph::new()
        .input("xb")
        .node("a", &["xb"], &["t"])
        .node("b", &["t"], &["yb", "cb"])
        .output("yb")
        .output("cb");
    let child_exec = ExecutionArena::new();
    let child = parent.subgraph(0, &body, child_exec.clone()).unwrap();
    let x = [3u8; 256];
    let mut pctx = ArenaRun::new(&parent);
    pctx.borrow_input("x", &x).unwrap();
    let mut cctx = ArenaRun::new(&child);
    cctx.borrow_input("xb", pctx.input(0, 0).unwrap()).unwrap();
    let t = cctx.output(0, 0, 256, 8).unwrap();
    assert!(child_exec.same_arena(child.execution_arena()));
    assert_eq!(t.kind(), ArenaKind::Execution);
    cctx.commit(0, 0, t).unwrap();
    cctx.finish(0).unwrap();
    assert_eq!(child_exec.stats().live_buffers, 1);
    assert_eq!(parent.execution_arena().stats().live_buffers, 0);
    let mut yb = cctx.output(1, 0, 256, 8).unwrap();
    let cb = cctx.output(1, 1, 256, 8).unwrap();
    assert_eq!(
        yb.kind(),
        ArenaKind::Io,
        "a parent graph output is allocated in the I/O arena"
    );
    assert_eq!(cb.kind(), ArenaKind::Execution);
    yb.as_mut_slice().fill(9);
    let yb_addr = yb.as_ptr();
    cctx.commit(1, 0, yb).unwrap();
    cctx.commit(1, 1, cb).unwrap();
    cctx.finish(1).unwrap();
    assert_eq!(
        child_exec.stats().live_buffers,
        0,
        "t freed at its last use inside the body"
    );
    let yb = cctx.take_value("yb").unwrap();
    let cb = cctx.take_value("cb").unwrap();
    assert!(
        parent.execution_arena().stats().live_buffers == 1,
        "cb lives in the parent's execution arena"
    );
    drop(cctx);
    pctx.commit(0, 0, yb).unwrap();
    pctx.commit(0, 1, cb).unwrap();
    pctx.finish(0).unwrap();
    let y = pctx.take_output("y").unwrap();
    assert_eq!(y.as_ptr(), yb_addr);
    assert!(y.as_slice().iter().all(|&b| b == 9));
    let copies = parent.io_arena().stats().copies
        + parent.execution_arena().stats().copies
        + child_exec.stats().copies;
    assert_eq!(copies, 0);
}

/// The former names (`GraphSpec`, `RunContext`, `PlannedContext`,
/// `KernelContext`, `ValueIndex`, `planner::Graph`, `planner::JsonGraph`)
/// stay as deprecated aliases: code written against them still builds and
/// means the same.
#[test]
#[allow(deprecated)]
fn former_names_are_aliases_of_the_new_ones() {
    use warmarena::planner::{parse_graph_json, Graph as PlannerGraph, JsonGraph, ValueId};
    use warmarena::session::{
        GraphSpec, KernelContext, OutputBuffer, PlannedContext, RunContext, ValueIndex,
    };

    fn run<'i, C: KernelContext<'i>>(ctx: &mut C, x: &'i [u8]) -> Vec<u8> {
        ctx.borrow_input("x", x).unwrap();
        let mut out = ctx.output(0, 0, x.len(), 1).unwrap();
        for (o, i) in out.as_mut_slice().iter_mut().zip(ctx.input(0, 0).unwrap()) {
            *o = i + 1;
        }
        ctx.commit(0, 0, out).unwrap();
        ctx.finish(0).unwrap();
        ctx.take_output("y").unwrap().as_slice().to_vec()
    }

    let g: GraphSpec = GraphSpec::new()
        .input("x")
        .node("inc", &["x"], &["y"])
        .output("y");
    let s = Session::new(&g, ExecutionArena::new(), IoArena::new()).unwrap();
    assert_eq!(run(&mut RunContext::new(&s), &[1, 2]), [2, 3]);
    let mut planned: PlannedContext<'_, '_> = PlannedContext::new(&s).unwrap();
    planned.prepare(|_| Some(2), |_| 0).unwrap();
    assert_eq!(run(&mut planned, &[1, 2]), [2, 3]);
    let y: Option<ValueIndex> = s.value_id("y");
    assert_eq!(y, Some(ValueId(1)));
    let file: JsonGraph = parse_graph_json(r#"{"values": [{"name": "a", "size": 8}]}"#).unwrap();
    let _: &PlannerGraph = &file.graph;
}
