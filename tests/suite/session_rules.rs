//! DESIGN.md rules 4, 5, 6 and 9 through the session API, on the example
//! network.

use warmarena::session::{ArenaRun, Session};
use warmarena::{ArenaKind, ExecutionArena, IoArena};
use warmarena_net::{bytes::as_bytes, Net, NetConfig, NetOutputs};

fn setup() -> (Net, Session) {
    let net = Net::new(NetConfig::tiny(), 3);
    let s = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
    (net, s)
}

#[test]
fn rule_4_clearing_the_run_context_never_invalidates_an_exported_output() {
    let (net, s) = setup();
    let image = net.example_input(1);
    let mut ctx = ArenaRun::new(&s);
    let out = net.run(&mut ctx, &image).unwrap();
    ctx.clear();
    drop(ctx);
    s.execution_arena().trim();
    s.io_arena().trim();
    let (features, logits) = net.reference(&image);
    assert_eq!(out.features.as_slice(), as_bytes(&features));
    assert_eq!(out.logits.as_slice(), as_bytes(&logits));
}

#[test]
fn rule_5_outputs_held_from_five_earlier_runs_keep_their_contents() {
    let (net, s) = setup();
    let mut held: Vec<(NetOutputs, Vec<f32>)> = Vec::new();
    let images: Vec<Vec<f32>> = (0..12).map(|i| net.example_input(i)).collect();
    let mut ctx = ArenaRun::new(&s);
    for (i, image) in images.iter().enumerate() {
        ctx.clear();
        let out = net.run(&mut ctx, image).unwrap();
        for (h, _) in &held {
            assert_ne!(
                h.logits.as_ptr(),
                out.logits.as_ptr(),
                "run {i} reused a pinned output"
            );
            assert_ne!(h.features.as_ptr(), out.features.as_ptr());
        }
        held.push((out, net.reference(image).1));
        if held.len() > 5 {
            held.remove(0);
        }
        for (h, expect) in &held {
            assert_eq!(h.logits.as_slice(), as_bytes(expect));
        }
    }
    let io = s.io_arena().stats();
    assert_eq!(io.leases, 10, "5 runs × 2 outputs held");
}

#[test]
fn rule_6_borrowed_inputs_never_enter_a_free_list() {
    let (net, s) = setup();
    let image = net.example_input(2);
    let mut ctx = ArenaRun::new(&s);
    let out = net.run(&mut ctx, &image).unwrap();
    drop(out);
    ctx.clear();
    let (e, io) = (s.execution_arena().stats(), s.io_arena().stats());
    // Every buffer that went back is one the arenas made: as many frees as
    // allocations, and nothing retained at the input's address.
    assert_eq!(
        e.frees + io.frees,
        e.warm_allocations + e.cold_allocations + io.warm_allocations + io.cold_allocations
    );
    assert_eq!(
        e.copies + io.copies,
        0,
        "the input was borrowed, not copied"
    );
    let again = s.io_arena().allocate(image.len() * 4, 64).unwrap();
    assert_ne!(again.as_ptr(), image.as_ptr() as *const u8);
}

#[test]
fn staged_inputs_are_counted_copies_in_the_io_arena() {
    let (net, s) = setup();
    let image = net.example_input(4);
    let mut ctx = ArenaRun::new(&s);
    ctx.stage_input("image", as_bytes(&image), 64).unwrap();
    assert_eq!(ctx.value("image").unwrap().kind(), Some(ArenaKind::Io));
    net.execute(&mut ctx).unwrap();
    let logits = ctx.take_output("logits").unwrap();
    assert_eq!(logits.as_slice(), as_bytes(&net.reference(&image).1));
    let io = s.io_arena().stats();
    assert_eq!((io.copies, io.copied_bytes), (1, image.len() * 4));
}

#[test]
fn rule_9_workspaces_are_execution_memory_inside_an_output_node() {
    let (_, s) = setup();
    let ctx = ArenaRun::new(&s);
    let head = s.node_id("head").unwrap();
    assert_eq!(s.slot_role(head, 0), Some(ArenaKind::Io));
    let ws = ctx.temporary(1 << 20, 64).unwrap();
    assert_eq!(ws.kind(), ArenaKind::Execution);
    drop(ws);
    assert_eq!(s.io_arena().stats().cold_allocations, 0);
}
