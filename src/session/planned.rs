//! The planned mode of a run: one execution-arena block of the plan's
//! height per run, every intermediate a window at its planned offset.
//!
//! [`PlannedRun`] runs a [`Session`] like [`ArenaRun`] does, but the
//! static activation planner ([`crate::planner`]) decides, once per shape,
//! where each intermediate lives: a run takes one block of the plan's
//! height from the execution arena (served warm from the second run on),
//! hands kernels windows into it for their intermediate outputs and
//! workspaces, and gives the block back when its last node finishes.
//! Declared outputs still come from the I/O arena (or the arena the parent
//! routes a subgraph's output to) and are exported as leases without
//! copying; graph inputs are borrowed or staged as in [`ArenaRun`].
//!
//! **Workspaces** are planned too: each node may ask for one workspace with
//! [`RunMemory::workspace`], modelled as a value the node writes and
//! nobody reads (live during that node only), so it shares bytes with values
//! that are not live then. Its size is given to [`PlannedRun::prepare`]
//! with the value sizes. ([`ArenaRun::temporary`] stays available there
//! for kernels that want an ordinary execution-arena buffer.)
//!
//! **Soundness of windows.** Windows are raw views of one block; they never
//! alias because (1) every plan is validated when first used (values live
//! at the same node get disjoint bytes), (2) nodes run strictly in execution
//! order (`output`, `workspace`, `commit` and `finish` name the running
//! node), (3) a node cannot finish while one of its windows is still held,
//! so the only windows held are the running node's, and every committed
//! value not yet freed is live at the running node, and (4) each window
//! keeps the block alive: a window leaked past its run, or past its
//! `PlannedRun`, keeps its (detached) block, which is never handed out
//! again.
//!
//! Kernels are written against [`RunMemory`] (`kernel.rs`), which both
//! kinds of run implement.

#[cfg(doc)]
use super::context::ArenaRun;
use super::context::SessionError;
use super::kernel::{OutputBuffer, RunMemory};
use super::router::{NodeId, Session, Target, ValueIdx};
use crate::arena::ArenaKind;
use crate::handle::ValueMemory;
use crate::planner::{
    validate, ActivationPlan, Node, PlanCache, PlanGraph, PlanOptions, ValueId, ViewMap,
};
use crate::{Allocation, IoLease};
use core::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;

/// The block of one run. Shared by the context and every window it hands
/// out, so a window never outlives the bytes it views.
type Block = Rc<Option<Allocation>>;

enum Inner {
    /// A declared output: an ordinary arena buffer.
    Arena(Allocation),
    /// A window of the planned block.
    Window {
        ptr: NonNull<u8>,
        len: usize,
        /// Planner value (a session value, or `values + node` for a workspace).
        value: usize,
        _block: Block,
    },
}

/// What [`PlannedRun`] hands a kernel: a window of the run's block (an
/// intermediate or a workspace) or, for a declared output, an I/O-arena
/// buffer. Move-only; not `Send` (a run is driven from one thread).
pub struct PlannedBuffer(Inner);

impl PlannedBuffer {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Inner::Arena(a) => a.as_slice(),
            // SAFETY: `ptr..ptr+len` lies inside the block `_block` keeps
            // alive; the plan gives it to this window alone while it is held
            // (see the module's soundness notes), and `&self` excludes writes.
            Inner::Window { ptr, len, .. } => unsafe {
                core::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }

    /// Whether this is a window of the planned block (not an arena buffer).
    pub fn is_window(&self) -> bool {
        matches!(self.0, Inner::Window { .. })
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr()
    }
}

impl OutputBuffer for PlannedBuffer {
    fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Inner::Arena(a) => a.as_mut_slice(),
            // SAFETY: as in `as_slice`; `&mut self` makes the access unique.
            Inner::Window { ptr, len, .. } => unsafe {
                core::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }
}

impl core::fmt::Debug for PlannedBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Inner::Arena(a) => f.debug_tuple("PlannedBuffer").field(a).finish(),
            Inner::Window { ptr, len, .. } => f
                .debug_struct("PlannedBuffer")
                .field("window", ptr)
                .field("len", len)
                .finish(),
        }
    }
}

/// One value's state in a run.
enum State<'i> {
    /// No memory.
    Empty,
    /// A window is handed out, not committed yet.
    Out,
    /// Committed window: `len` bytes at `offset` of the block.
    Window { offset: usize, len: usize },
    /// An input or a declared output.
    ValueMemory(ValueMemory<'i>),
}

/// A run of a [`Session`] in planned mode: its intermediates and
/// workspaces are windows of one planned block (see the module
/// documentation).
///
/// ```
/// use warmarena_net::{bytes::as_bytes, Net, NetConfig};
/// use warmarena::session::{PlannedRun, Session};
/// use warmarena::{ExecutionArena, IoArena};
/// let net = Net::new(NetConfig::tiny(), 7);
/// let session = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
/// let mut ctx = PlannedRun::new(&session).unwrap();
/// let cfg = net.config;
/// let height = ctx.prepare(|v| cfg.value_bytes(v), |n| cfg.workspace_bytes(n)).unwrap().height;
/// let image = net.example_input(1);
/// let out = net.run(&mut ctx, &image).unwrap();
/// assert_eq!(out.logits.as_slice(), as_bytes(&net.reference(&image).1));
/// // The whole run took one execution block of the plan's height.
/// let cap = warmarena::size_class::capacity(warmarena::size_class::class_of(height).unwrap());
/// assert_eq!(session.execution_arena().stats().peak_live_bytes, cap);
/// ```
pub struct PlannedRun<'s, 'i> {
    session: &'s Session,
    cache: PlanCache,
    graph: PlanGraph,
    plan: Option<Arc<ActivationPlan>>,
    /// Sizes (per planner value) of `plan`.
    sizes: Vec<usize>,
    scratch: Vec<usize>,
    values: Vec<State<'i>>,
    /// Per node: its workspace window was handed out this run.
    workspace_out: Vec<bool>,
    /// The node whose turn it is.
    next: NodeId,
    block: Block,
    /// Start of this run's block (`None` between runs).
    base: Option<NonNull<u8>>,
}

impl core::fmt::Debug for PlannedRun<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PlannedRun")
            .field("height", &self.plan.as_ref().map(|p| p.height))
            .field("next", &self.next)
            .finish()
    }
}

/// Plans kept per context (distinct shapes).
const CACHE_PLANS: usize = 16;

impl<'s, 'i> PlannedRun<'s, 'i> {
    /// A planned run of `session`, reusable run after run. The planner's graph is
    /// the session's, plus one workspace value per node (written by it,
    /// read by nobody). Plan with [`prepare`](Self::prepare) before a run.
    pub fn new(session: &'s Session) -> Result<Self, SessionError> {
        Self::with_options(session, PlanOptions::default())
    }

    /// [`new`](Self::new) with planner options (alignment, search effort).
    pub fn with_options(session: &'s Session, options: PlanOptions) -> Result<Self, SessionError> {
        let n = session.names.len();
        let id = |v: usize| ValueId(v as u32);
        let graph = PlanGraph {
            num_values: n + session.nodes.len(),
            nodes: session
                .nodes
                .iter()
                .enumerate()
                .map(|(k, node)| Node {
                    inputs: node.inputs.iter().map(|&v| id(v)).collect(),
                    outputs: node
                        .outputs
                        .iter()
                        .map(|&v| id(v))
                        .chain([id(n + k)])
                        .collect(),
                })
                .collect(),
            inputs: (0..n).filter(|&v| session.is_input[v]).map(id).collect(),
            // Declared outputs are not planned (size 0 here): they live in
            // their own arena buffers.
            outputs: Vec::new(),
        };
        let cache = PlanCache::new(
            graph.clone(),
            ViewMap::new(),
            Vec::new(),
            options,
            CACHE_PLANS,
        )
        .map_err(SessionError::Plan)?;
        Ok(PlannedRun {
            session,
            cache,
            sizes: Vec::new(),
            scratch: vec![0; graph.num_values],
            graph,
            plan: None,
            values: (0..n).map(|_| State::Empty).collect(),
            workspace_out: vec![false; session.nodes.len()],
            next: 0,
            block: Rc::new(None),
            base: None,
        })
    }

    /// Plans for these sizes (or reuses the plan of a shape seen before,
    /// through the [`PlanCache`]): `value_bytes` gives each intermediate's
    /// bytes by name, `workspace_bytes` each node's workspace (0 for none).
    /// Declared outputs and graph inputs are not planned and not asked for.
    /// Between runs only; when the sizes equal the current plan's this is a
    /// comparison (no allocation).
    pub fn prepare(
        &mut self,
        value_bytes: impl Fn(&str) -> Option<usize>,
        workspace_bytes: impl Fn(NodeId) -> usize,
    ) -> Result<&ActivationPlan, SessionError> {
        if self.next != 0 || self.base.is_some() {
            return Err(SessionError::RunInProgress);
        }
        let s = self.session;
        let n = s.names.len();
        for v in 0..n {
            self.scratch[v] = if s.is_input[v] || s.is_output[v] {
                0
            } else {
                value_bytes(&s.names[v]).ok_or_else(|| SessionError::NoSize(s.names[v].clone()))?
            };
        }
        for k in 0..s.nodes.len() {
            self.scratch[n + k] = workspace_bytes(k);
        }
        if self.plan.is_none() || self.scratch != self.sizes {
            let scratch = &self.scratch;
            let plan = self
                .cache
                .get(|v| Some(scratch[v.index()]))
                .map_err(SessionError::Plan)?
                .ok_or(SessionError::NotPrepared)?;
            // The windows' soundness rests on this check (done once per
            // new shape): values live at one node never share bytes.
            validate(&self.graph, &ViewMap::new(), &plan, |v| {
                Some(scratch[v.index()])
            })
            .map_err(|_| SessionError::InvalidPlan)?;
            self.sizes.clone_from(&self.scratch);
            self.plan = Some(plan);
        }
        Ok(self.plan.as_deref().expect("planned above"))
    }

    /// The current plan (`None` before [`prepare`](Self::prepare)).
    pub fn plan(&self) -> Option<&ActivationPlan> {
        self.plan.as_deref()
    }

    /// The graph the planner sees: the session's values (same ids), then
    /// one workspace value per node (id `values + node`). With
    /// [`plan`](Self::plan) and [`planned_bytes`](Self::planned_bytes) it is
    /// what [`crate::planner::validate`] checks.
    pub fn planner_graph(&self) -> &PlanGraph {
        &self.graph
    }

    /// Bytes planned for planner value `v` (see [`planner_graph`](Self::planner_graph)).
    pub fn planned_bytes(&self, v: ValueId) -> Option<usize> {
        self.sizes.get(v.index()).copied()
    }

    /// Offset of intermediate `name` in the block (`None` when not planned).
    pub fn offset_of(&self, name: &str) -> Option<usize> {
        let v = self.session.value_index(name)?;
        if self.session.is_output[v] {
            return None;
        }
        self.plan.as_ref()?.offset_of(ValueId(v as u32))
    }

    /// Offset of `node`'s workspace in the block.
    pub fn workspace_offset(&self, node: NodeId) -> Option<usize> {
        if node >= self.session.nodes.len() {
            return None;
        }
        let v = self.session.names.len() + node;
        self.plan.as_ref()?.offset_of(ValueId(v as u32))
    }

    /// Start of the current run's block (`None` between runs).
    pub fn block_ptr(&self) -> Option<*const u8> {
        self.base.map(|p| p.as_ptr() as *const u8)
    }

    /// Plan lookups answered by the cache, and those that had to plan.
    pub fn cache_stats(&self) -> (u64, u64) {
        (self.cache.hits(), self.cache.misses())
    }

    /// The session this context runs.
    pub fn session(&self) -> &'s Session {
        self.session
    }

    fn node_check(&self, node: NodeId) -> Result<(), SessionError> {
        if node >= self.session.nodes.len() {
            return Err(SessionError::UnknownNode(node));
        }
        if node != self.next {
            return Err(SessionError::OutOfOrder {
                node,
                expected: self.next,
            });
        }
        Ok(())
    }

    /// The block of this run, taken from the execution arena on first use.
    fn base(&mut self) -> Result<NonNull<u8>, SessionError> {
        if let Some(b) = self.base {
            return Ok(b);
        }
        let plan = self.plan.as_ref().ok_or(SessionError::NotPrepared)?;
        let base = if plan.height == 0 {
            NonNull::<u64>::dangling().cast()
        } else {
            let a = self.session.exec.allocate(plan.height, plan.alignment)?;
            // Read-only pointer use here; windows write through `base`,
            // which comes from the arena's own pointer, not from a borrow.
            let p = NonNull::new(a.as_ptr() as *mut u8).expect("arena pointers are non-null");
            if Rc::get_mut(&mut self.block).is_none() {
                // A window of an earlier run is still held: leave it that
                // block and start a fresh one.
                self.block = Rc::new(None);
            }
            *Rc::get_mut(&mut self.block).expect("fresh or unshared") = Some(a);
            p
        };
        self.base = Some(base);
        Ok(base)
    }

    /// A window of `bytes` for planner value `pv` (checked against the plan).
    fn window(
        &mut self,
        pv: usize,
        what: impl FnOnce() -> String,
        bytes: usize,
        align: usize,
    ) -> Result<PlannedBuffer, SessionError> {
        let plan = self.plan.as_ref().ok_or(SessionError::NotPrepared)?;
        let planned = self.sizes[pv];
        if bytes > planned || !align.is_power_of_two() || align > plan.alignment {
            return Err(SessionError::OutsidePlan {
                value: what(),
                planned,
                asked: bytes,
            });
        }
        let offset = plan
            .offset_of(ValueId(pv as u32))
            .ok_or(SessionError::InvalidPlan)?;
        let base = self.base()?;
        // SAFETY: the validated plan puts `offset + planned <= height`, and
        // the block holds at least `height` bytes (or `planned` is 0 and
        // `offset` is 0).
        let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(offset)) };
        Ok(PlannedBuffer(Inner::Window {
            ptr,
            len: bytes,
            value: pv,
            _block: Rc::clone(&self.block),
        }))
    }

    /// Uses the caller's bytes as graph input `name` (no copy).
    pub fn borrow_input(&mut self, name: &str, bytes: &'i [u8]) -> Result<(), SessionError> {
        let v = self.input_slot(name)?;
        self.values[v] = State::ValueMemory(ValueMemory::Borrowed(bytes));
        Ok(())
    }

    /// Copies the caller's bytes into the I/O arena as graph input `name`
    /// (counted as one payload copy).
    pub fn stage_input(
        &mut self,
        name: &str,
        bytes: &[u8],
        align: usize,
    ) -> Result<(), SessionError> {
        let v = self.input_slot(name)?;
        let mut buf = self.session.io.allocate(bytes.len(), align)?;
        buf.as_mut_slice().copy_from_slice(bytes);
        self.session.io.core.note_copy(bytes.len());
        self.values[v] = State::ValueMemory(ValueMemory::Owned(buf));
        Ok(())
    }

    fn input_slot(&self, name: &str) -> Result<ValueIdx, SessionError> {
        let v = self.session.value_named(name)?;
        if !self.session.is_input[v] {
            return Err(SessionError::NotAnInput(name.to_string()));
        }
        if !matches!(self.values[v], State::Empty) {
            return Err(SessionError::AlreadySet(name.to_string()));
        }
        Ok(v)
    }

    /// Drops every value of the run and gives the block back; exported
    /// outputs stay valid. A window still held keeps its block, which this
    /// context never hands out again.
    pub fn clear(&mut self) {
        for v in &mut self.values {
            *v = State::Empty;
        }
        self.workspace_out.fill(false);
        self.end_run();
    }

    fn end_run(&mut self) {
        self.next = 0;
        self.base = None;
        match Rc::get_mut(&mut self.block) {
            Some(b) => *b = None,
            None => self.block = Rc::new(None),
        }
    }
}

impl<'i> RunMemory<'i> for PlannedRun<'_, 'i> {
    type Buffer = PlannedBuffer;

    /// A declared output gets an arena buffer from its routed arena; an
    /// intermediate gets its window (`bytes` at most its planned size,
    /// `align` at most the plan's alignment).
    fn output(
        &mut self,
        node: NodeId,
        slot: usize,
        bytes: usize,
        align: usize,
    ) -> Result<PlannedBuffer, SessionError> {
        self.node_check(node)?;
        let v = self.session.output_value(node, slot)?;
        let s = self.session;
        if !matches!(self.values[v], State::Empty) {
            return Err(SessionError::AlreadySet(s.names[v].clone()));
        }
        match &s.targets[v] {
            Target::Input => Err(SessionError::NotAnOutput(s.names[v].clone())),
            Target::Io(a) if s.is_output[v] => {
                Ok(PlannedBuffer(Inner::Arena(a.allocate(bytes, align)?)))
            }
            Target::Execution(a) if s.is_output[v] => {
                Ok(PlannedBuffer(Inner::Arena(a.allocate(bytes, align)?)))
            }
            _ => {
                let w = self.window(v, || s.names[v].clone(), bytes, align)?;
                self.values[v] = State::Out;
                Ok(w)
            }
        }
    }

    fn workspace(
        &mut self,
        node: NodeId,
        bytes: usize,
        align: usize,
    ) -> Result<PlannedBuffer, SessionError> {
        self.node_check(node)?;
        let s = self.session;
        let what = || format!("{}/workspace", s.nodes[node].name);
        if self.workspace_out[node] {
            return Err(SessionError::AlreadySet(what()));
        }
        let w = self.window(s.names.len() + node, what, bytes, align)?;
        self.workspace_out[node] = true;
        Ok(w)
    }

    fn commit(
        &mut self,
        node: NodeId,
        slot: usize,
        buf: PlannedBuffer,
    ) -> Result<(), SessionError> {
        self.node_check(node)?;
        let v = self.session.output_value(node, slot)?;
        let s = self.session;
        match buf.0 {
            Inner::Arena(a) => {
                let target = &s.targets[v];
                if !s.is_output[v] || target.core() != Some(a.parts().0) {
                    return Err(SessionError::WrongArena {
                        value: s.names[v].clone(),
                        expected: target.kind(),
                    });
                }
                if !matches!(self.values[v], State::Empty) {
                    return Err(SessionError::AlreadySet(s.names[v].clone()));
                }
                self.values[v] = State::ValueMemory(ValueMemory::Owned(a));
            }
            Inner::Window {
                ptr,
                len,
                value,
                _block,
            } => {
                let base = self.base.map(|b| b.as_ptr() as usize);
                if value != v || !Rc::ptr_eq(&_block, &self.block) || base.is_none() {
                    return Err(SessionError::WrongArena {
                        value: s.names[v].clone(),
                        expected: Some(ArenaKind::Execution),
                    });
                }
                if !matches!(self.values[v], State::Out) {
                    return Err(SessionError::AlreadySet(s.names[v].clone()));
                }
                let offset = ptr.as_ptr() as usize - base.unwrap_or(0);
                self.values[v] = State::Window { offset, len };
            }
        }
        Ok(())
    }

    fn input(&self, node: NodeId, slot: usize) -> Result<&[u8], SessionError> {
        let v = self.session.input_value(node, slot)?;
        match (&self.values[v], self.base) {
            (State::ValueMemory(m), _) => Ok(m.as_slice()),
            // SAFETY: a committed, not yet freed value is live at the running
            // node, so by the validated plan its bytes are disjoint from
            // every window handed out (all belong to the running node); the
            // block is alive (held by `self.block`), and `&self` keeps
            // `commit`/`finish`/`clear` from running while the slice lives.
            (State::Window { offset, len }, Some(base)) => {
                Ok(unsafe { core::slice::from_raw_parts(base.as_ptr().add(*offset), *len) })
            }
            _ => Err(SessionError::NotSet(self.session.names[v].clone())),
        }
    }

    /// Frees the values whose last use was `node` and passes the turn to
    /// the next node; after the last node the block goes back to the arena.
    /// Refused while a window of `node` is still held.
    fn finish(&mut self, node: NodeId) -> Result<(), SessionError> {
        self.node_check(node)?;
        if Rc::strong_count(&self.block) > 1 {
            return Err(SessionError::WindowsOutstanding(
                self.session.nodes[node].name.clone(),
            ));
        }
        for &v in &self.session.nodes[node].frees {
            self.values[v] = State::Empty;
        }
        // An output handed out and dropped uncommitted is simply unset.
        for &v in &self.session.nodes[node].outputs {
            if matches!(self.values[v], State::Out) {
                self.values[v] = State::Empty;
            }
        }
        self.workspace_out[node] = false;
        self.next += 1;
        if self.next == self.session.nodes.len() {
            self.end_run();
        }
        Ok(())
    }

    fn borrow_input(&mut self, name: &str, bytes: &'i [u8]) -> Result<(), SessionError> {
        PlannedRun::borrow_input(self, name, bytes)
    }

    fn take_output(&mut self, name: &str) -> Result<IoLease, SessionError> {
        let s = self.session;
        let v = s.value_named(name)?;
        if !s.is_output[v] {
            return Err(SessionError::NotAnOutput(name.to_string()));
        }
        match core::mem::replace(&mut self.values[v], State::Empty) {
            State::ValueMemory(ValueMemory::Owned(a)) => match a.into_lease() {
                Ok(l) => Ok(l),
                Err(a) => {
                    self.values[v] = State::ValueMemory(ValueMemory::Owned(a));
                    Err(SessionError::WrongArena {
                        value: name.to_string(),
                        expected: Some(ArenaKind::Io),
                    })
                }
            },
            State::ValueMemory(ValueMemory::Leased(l)) => Ok(l),
            other => {
                self.values[v] = other;
                Err(SessionError::NotSet(name.to_string()))
            }
        }
    }
}
