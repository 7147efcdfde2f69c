//! Every input a fuzz target (fuzz/, `bash scripts/fuzz.sh`) ever crashed
//! on, as a plain test, so the fix stays fixed without a nightly toolchain.
//! The inputs are also in the seed corpora under fuzz/corpus/<target>/.

use warmarena::planner::{plan, Graph, Node, PlanError, PlanOptions, ValueId, ViewMap};

/// fuzz/corpus/planner/regress-view-chain-unknown: a view whose own id is
/// in range, aliasing a view whose source is not, made `compute_liveness`
/// index past the end of its table (a panic) instead of answering
/// `UnknownValue`.
#[test]
fn a_view_chain_reaching_an_unknown_value_is_an_error_not_a_panic() {
    let v = ValueId;
    let g = Graph {
        num_values: 10,
        nodes: vec![Node {
            inputs: vec![v(0)],
            outputs: vec![],
        }],
        inputs: vec![],
        outputs: vec![],
    };
    let mut views = ViewMap::new();
    views.insert(v(1), v(8));
    views.insert(v(0), v(8));
    views.insert(v(8), v(12));
    let r = plan(&g, &views, &[], |_| Some(64), &PlanOptions::default());
    assert_eq!(r, Err(PlanError::UnknownValue { value: v(12) }));
}
