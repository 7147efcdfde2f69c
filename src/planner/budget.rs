//! How a search is stopped, and how it ended.

/// Stops a search: a node limit (deterministic) and an optional callback the
/// caller can use for wall-clock limits. [`solve`](super::solve) and
/// [`plan`](super::plan()) read no clock; [`plan_trace`](super::plan_trace)
/// builds such a callback from its deadline.
pub struct Budget<'a> {
    /// Most search nodes to expand in total.
    pub max_nodes: u64,
    /// Called every few thousand nodes (and every few hundred placements of
    /// the constructive passes); returning `true` stops the work.
    pub stop: Option<&'a dyn Fn() -> bool>,
}

impl Budget<'_> {
    /// A budget of `max_nodes` nodes and no callback.
    pub const fn nodes(max_nodes: u64) -> Self {
        Budget {
            max_nodes,
            stop: None,
        }
    }
}

/// How a search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The tree was exhausted: no placement is at or below the final capacity.
    Exhausted,
    /// A placement at or below the capacity was found.
    Found,
    /// The budget ran out.
    OutOfBudget,
}
