//! Plans for dynamic shapes, keyed by the resolved sizes.
//!
//! A model with symbolic dimensions is planned again whenever its shapes
//! change; most runs repeat a shape seen before. [`PlanCache`] checks the
//! graph once, and keeps one plan per distinct vector of resolved buffer
//! owner sizes, so a repeated shape costs one hash lookup instead of a plan.

use std::collections::HashMap;
use std::sync::Arc;

use super::graph::{InPlaceHint, PlanError, PlanGraph, ValueId, ViewMap};
use super::liveness::compute_liveness;
use super::plan::{plan, ActivationPlan, PlanOptions, PlanStatus};

/// Plans of one graph, one per distinct set of resolved sizes.
///
/// ```
/// use warmarena::planner::{PlanGraph, Node, PlanCache, PlanOptions, ValueId, ViewMap};
/// let v = ValueId;
/// let g = PlanGraph {
///     num_values: 3,
///     nodes: vec![Node { inputs: vec![v(0)], outputs: vec![v(1)] }, Node { inputs: vec![v(1)], outputs: vec![v(2)] }],
///     inputs: vec![v(0)],
///     outputs: vec![v(2)],
/// };
/// let mut cache = PlanCache::new(g, ViewMap::new(), Vec::new(), PlanOptions::default(), 8).unwrap();
/// let batch = 4;
/// let p = cache.get(|_| Some(batch * 256)).unwrap().unwrap();
/// assert_eq!(p.height, 2 * 1024);
/// let again = cache.get(|_| Some(batch * 256)).unwrap().unwrap();
/// assert!(std::sync::Arc::ptr_eq(&p, &again)); // no re-plan
/// assert_eq!((cache.hits(), cache.misses()), (1, 1));
/// assert!(cache.get(|_| None).unwrap().is_none()); // still symbolic: deferred
/// ```
pub struct PlanCache {
    graph: PlanGraph,
    views: ViewMap,
    hints: Vec<InPlaceHint>,
    options: PlanOptions,
    owners: Vec<ValueId>,
    plans: HashMap<Vec<usize>, Arc<ActivationPlan>>,
    order: Vec<Vec<usize>>,
    capacity: usize,
    hits: u64,
    misses: u64,
}

impl PlanCache {
    /// A cache for `graph` keeping at most `capacity` plans (at least one;
    /// the oldest is dropped first). Checks the graph now.
    pub fn new(
        graph: PlanGraph,
        views: ViewMap,
        hints: Vec<InPlaceHint>,
        options: PlanOptions,
        capacity: usize,
    ) -> Result<Self, PlanError> {
        let live = compute_liveness(&graph, &views)?;
        let owners = live.owners().map(|(v, _)| v).collect();
        Ok(PlanCache {
            graph,
            views,
            hints,
            options,
            owners,
            plans: HashMap::new(),
            order: Vec::new(),
            capacity: capacity.max(1),
            hits: 0,
            misses: 0,
        })
    }

    /// The plan for the sizes `size` gives, planning only for a size vector
    /// not seen before. `Ok(None)` while some owner's size is symbolic.
    pub fn get(
        &mut self,
        size: impl Fn(ValueId) -> Option<usize>,
    ) -> Result<Option<Arc<ActivationPlan>>, PlanError> {
        let mut key = Vec::with_capacity(self.owners.len());
        for &v in &self.owners {
            match size(v) {
                Some(s) => key.push(s),
                None => return Ok(None),
            }
        }
        if let Some(p) = self.plans.get(&key) {
            self.hits += 1;
            return Ok(Some(Arc::clone(p)));
        }
        self.misses += 1;
        let status = plan(&self.graph, &self.views, &self.hints, &size, &self.options)?;
        let PlanStatus::Ready(p) = status else {
            return Ok(None);
        };
        let p = Arc::new(p);
        if self.order.len() >= self.capacity {
            let old = self.order.remove(0);
            self.plans.remove(&old);
        }
        self.order.push(key.clone());
        self.plans.insert(key, Arc::clone(&p));
        Ok(Some(p))
    }

    /// Lookups answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Lookups that had to plan.
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// Plans held.
    pub fn len(&self) -> usize {
        self.plans.len()
    }

    /// True when no plan is held.
    pub fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }
}
