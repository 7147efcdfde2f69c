//! [`Graph`]: what the router needs to know of a graph — nodes in
//! execution order with named inputs and outputs, the graph's inputs, and its
//! declared outputs — and its validation.

use std::collections::{HashMap, HashSet};

/// One node: a name and the values it reads and writes, by name. Output
/// slot `k` is the `k`-th name in `outputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// The node's name, unique in the graph.
    pub name: String,
    /// Values read, in input-slot order.
    pub inputs: Vec<String>,
    /// Values written, in output-slot order.
    pub outputs: Vec<String>,
}

/// A model's graph, the one users build: named values, nodes in execution
/// order, graph inputs and declared outputs. A [`Session`](super::Session)
/// runs it; the planner reads it by value id
/// ([`PlanGraph`](crate::planner::PlanGraph)) through a
/// [`PlannedRun`](super::PlannedRun).
///
/// ```
/// use warmarena::session::Graph;
/// let g = Graph::new()
///     .input("x")
///     .node("relu", &["x"], &["y"])
///     .node("double", &["y"], &["z"])
///     .output("z");
/// assert!(g.validate().is_ok());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// Values the caller provides.
    pub inputs: Vec<String>,
    /// Values the caller receives (declared graph outputs).
    pub outputs: Vec<String>,
    /// Nodes in execution order.
    pub nodes: Vec<NodeSpec>,
}

/// Why a graph was refused; each variant lists every offending name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphError {
    /// Values read by some node that no node produces and that are not graph inputs.
    UnknownValues(Vec<String>),
    /// Values produced more than once (by two nodes, or by a node and the caller).
    ProducedTwice(Vec<String>),
    /// `(node, value)` pairs where a node reads a value produced only by a later node.
    ReadBeforeProduced(Vec<(String, String)>),
    /// Declared outputs that nothing produces.
    OutputsNotProduced(Vec<String>),
    /// Node names used more than once.
    DuplicateNodes(Vec<String>),
}

impl core::fmt::Display for GraphError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GraphError::UnknownValues(v) => write!(f, "unknown values: {}", v.join(", ")),
            GraphError::ProducedTwice(v) => write!(f, "values produced twice: {}", v.join(", ")),
            GraphError::ReadBeforeProduced(v) => {
                let pairs: Vec<String> = v.iter().map(|(n, x)| format!("{n} reads {x}")).collect();
                write!(f, "read before produced: {}", pairs.join(", "))
            }
            GraphError::OutputsNotProduced(v) => {
                write!(f, "declared outputs nobody produces: {}", v.join(", "))
            }
            GraphError::DuplicateNodes(v) => write!(f, "duplicate node names: {}", v.join(", ")),
        }
    }
}

impl std::error::Error for GraphError {}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn sorted(set: HashSet<String>) -> Vec<String> {
    let mut v: Vec<String> = set.into_iter().collect();
    v.sort();
    v
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a graph input.
    pub fn input(mut self, name: &str) -> Self {
        self.inputs.push(name.to_string());
        self
    }

    /// Declares a graph output.
    pub fn output(mut self, name: &str) -> Self {
        self.outputs.push(name.to_string());
        self
    }

    /// Appends a node (execution order is the order of calls).
    pub fn node(mut self, name: &str, inputs: &[&str], outputs: &[&str]) -> Self {
        self.nodes.push(NodeSpec {
            name: name.to_string(),
            inputs: names(inputs),
            outputs: names(outputs),
        });
        self
    }

    /// Checks the graph; the first failing rule is reported with every
    /// offending name.
    ///
    /// ```
    /// use warmarena::session::{GraphError, Graph};
    /// let g = Graph::new().input("x").node("a", &["x", "w"], &["y"]).output("y");
    /// assert_eq!(g.validate(), Err(GraphError::UnknownValues(vec!["w".into()])));
    /// ```
    pub fn validate(&self) -> Result<(), GraphError> {
        let mut seen_nodes = HashSet::new();
        let dup_nodes: HashSet<String> = self
            .nodes
            .iter()
            .filter(|n| !seen_nodes.insert(n.name.as_str()))
            .map(|n| n.name.clone())
            .collect();
        if !dup_nodes.is_empty() {
            return Err(GraphError::DuplicateNodes(sorted(dup_nodes)));
        }
        // Producer of each value: None for graph inputs, Some(node) otherwise.
        let mut producer: HashMap<&str, Option<usize>> = HashMap::new();
        let mut twice = HashSet::new();
        for i in &self.inputs {
            if producer.insert(i.as_str(), None).is_some() {
                twice.insert(i.clone());
            }
        }
        for (k, n) in self.nodes.iter().enumerate() {
            for o in &n.outputs {
                if producer.insert(o.as_str(), Some(k)).is_some() {
                    twice.insert(o.clone());
                }
            }
        }
        if !twice.is_empty() {
            return Err(GraphError::ProducedTwice(sorted(twice)));
        }
        let mut unknown = HashSet::new();
        let mut early = Vec::new();
        for (k, n) in self.nodes.iter().enumerate() {
            for i in &n.inputs {
                match producer.get(i.as_str()) {
                    None => {
                        unknown.insert(i.clone());
                    }
                    Some(Some(p)) if *p >= k => early.push((n.name.clone(), i.clone())),
                    _ => {}
                }
            }
        }
        if !unknown.is_empty() {
            return Err(GraphError::UnknownValues(sorted(unknown)));
        }
        if !early.is_empty() {
            return Err(GraphError::ReadBeforeProduced(early));
        }
        let missing: HashSet<String> = self
            .outputs
            .iter()
            .filter(|o| !matches!(producer.get(o.as_str()), Some(Some(_))))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(GraphError::OutputsNotProduced(sorted(missing)));
        }
        Ok(())
    }
}
