//! Graph validation, one error at a time, each listing the offending names.

use warmarena::session::{Graph, GraphError, Session};
use warmarena::{ExecutionArena, IoArena};

fn check(g: Graph, expect: GraphError) {
    assert_eq!(g.validate(), Err(expect.clone()));
    let err = Session::new(&g, ExecutionArena::new(), IoArena::new()).unwrap_err();
    assert_eq!(err, expect);
    assert!(!err.to_string().is_empty());
}

#[test]
fn unknown_values_are_listed() {
    check(
        Graph::new()
            .input("x")
            .node("a", &["x", "w"], &["y"])
            .node("b", &["q", "y"], &["z"])
            .output("z"),
        GraphError::UnknownValues(vec!["q".into(), "w".into()]),
    );
}

#[test]
fn a_value_produced_twice_is_listed() {
    check(
        Graph::new()
            .input("x")
            .node("a", &["x"], &["y"])
            .node("b", &["x"], &["y"])
            .output("y"),
        GraphError::ProducedTwice(vec!["y".into()]),
    );
    check(
        Graph::new()
            .input("x")
            .node("a", &["x"], &["x"])
            .output("x"),
        GraphError::ProducedTwice(vec!["x".into()]),
    );
}

#[test]
fn a_read_before_its_producer_is_listed() {
    check(
        Graph::new()
            .input("x")
            .node("a", &["t"], &["y"])
            .node("b", &["x"], &["t"])
            .output("y"),
        GraphError::ReadBeforeProduced(vec![("a".into(), "t".into())]),
    );
    check(
        Graph::new()
            .input("x")
            .node("self", &["x", "s"], &["s"])
            .output("s"),
        GraphError::ReadBeforeProduced(vec![("self".into(), "s".into())]),
    );
}

#[test]
fn an_output_nobody_produces_is_listed() {
    check(
        Graph::new()
            .input("x")
            .node("a", &["x"], &["y"])
            .output("y")
            .output("nope")
            .output("x"),
        GraphError::OutputsNotProduced(vec!["nope".into(), "x".into()]),
    );
}

#[test]
fn duplicate_node_names_are_listed() {
    check(
        Graph::new()
            .input("x")
            .node("a", &["x"], &["y"])
            .node("a", &["y"], &["z"])
            .output("z"),
        GraphError::DuplicateNodes(vec!["a".into()]),
    );
}
