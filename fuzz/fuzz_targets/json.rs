//! The JSON reader and the graph format on arbitrary text: an error or a
//! value, never a panic (deep nesting included); a graph that parses is
//! planned and the plan validates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warmarena::planner::{
    parse_graph_json, parse_json, plan_with_budget, validate, Budget, PlanOptions, PlanStatus,
    ValueId,
};

warmarena_fuzz::op_counts!(
    COUNTS,
    "json",
    ["inputs", "utf8", "json_ok", "graph_ok", "planned", "deferred", "plan_err"]
);

fuzz_target!(|data: &[u8]| {
    COUNTS.bump(0);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    COUNTS.bump(1);
    if parse_json(text).is_ok() {
        COUNTS.bump(2);
    }
    let Ok(g) = parse_graph_json(text) else {
        return;
    };
    COUNTS.bump(3);
    if g.graph.num_values > 256 || g.graph.nodes.len() > 256 {
        return;
    }
    let opts = PlanOptions::default().alignment(g.alignment.unwrap_or(64));
    let size = |v: ValueId| g.sizes.get(v.index()).copied().flatten();
    match plan_with_budget(
        &g.graph,
        &g.views,
        &g.hints,
        size,
        &opts,
        &Budget::nodes(256),
    ) {
        Ok(PlanStatus::Ready(p)) => {
            COUNTS.bump(4);
            validate(&g.graph, &g.views, &p, size).expect("plan validates");
        }
        Ok(PlanStatus::Deferred { .. }) => COUNTS.bump(5),
        Err(_) => COUNTS.bump(6),
    }
});
