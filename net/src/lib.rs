//! A small real network, run end to end through the session API: two 3×3
//! convolutions with ReLU and a residual add, a mixed-output head (a
//! declared output and an intermediate from one node, with a workspace), and
//! a fully connected layer. Used by the example executor, the binary's
//! report, the tests, and the Python bindings.
//!
//! ```text
//! image ─ conv1 ─ relu1 ─┬─ conv2 ─ relu2 ─ add ─ head ─┬─ features (output)
//!                        └───────────────────┘          └─ pooled ─ fc ─ logits (output)
//! ```
//!
//! ```
//! use warmarena_net::{Net, NetConfig};
//! use warmarena::session::{ArenaRun, Session};
//! use warmarena::{ExecutionArena, IoArena};
//! let net = Net::new(NetConfig::tiny(), 7);
//! let session = Session::new(&Net::graph(), ExecutionArena::new(), IoArena::new()).unwrap();
//! let image = net.example_input(1);
//! let mut ctx = ArenaRun::new(&session);
//! let out = net.run(&mut ctx, &image).unwrap();
//! let (features, logits) = net.reference(&image);
//! assert_eq!(out.features.as_slice(), warmarena_net::bytes::as_bytes(&features));
//! assert_eq!(out.logits.as_slice(), warmarena_net::bytes::as_bytes(&logits));
//! ```

pub mod bytes;
pub mod kernels;

use bytes::{as_bytes, f32s, f32s_mut, NotF32};
use warmarena::session::{Graph, NodeId, OutputBuffer, RunMemory, SessionError};
use warmarena::IoLease;

/// Node ids, in execution order.
pub mod nodes {
    /// 3×3 conv, input channels → channels.
    pub const CONV1: usize = 0;
    /// ReLU.
    pub const RELU1: usize = 1;
    /// 3×3 conv, channels → channels.
    pub const CONV2: usize = 2;
    /// ReLU.
    pub const RELU2: usize = 3;
    /// Residual add of relu1 and relu2.
    pub const ADD: usize = 4;
    /// Mixed-output head: features (declared output), pooled (intermediate).
    pub const HEAD: usize = 5;
    /// Fully connected layer: pooled → logits (declared output).
    pub const FC: usize = 6;
}
use nodes::*;

/// The network's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetConfig {
    /// Channels of the input image.
    pub in_channels: usize,
    /// Channels inside the network.
    pub channels: usize,
    /// Height and width of the image (even).
    pub size: usize,
    /// Logits.
    pub classes: usize,
}

impl NetConfig {
    /// The default: 8 → 16 channels on 64×64, 10 classes (activations of
    /// 256 KiB, im2col workspaces of 2.25 MiB).
    pub fn standard() -> Self {
        NetConfig {
            in_channels: 8,
            channels: 16,
            size: 64,
            classes: 10,
        }
    }

    /// A small shape for doctests and Miri.
    pub fn tiny() -> Self {
        NetConfig {
            in_channels: 2,
            channels: 4,
            size: 8,
            classes: 3,
        }
    }

    /// Floats in the input image.
    pub fn input_len(&self) -> usize {
        self.in_channels * self.size * self.size
    }

    fn act(&self) -> usize {
        self.channels * self.size * self.size
    }

    fn pooled(&self) -> usize {
        self.channels * (self.size / 2) * (self.size / 2)
    }

    /// Bytes of every buffer the network allocates per run, as
    /// `(node, what, bytes)`, in allocation order — for tests that compute
    /// the live set independently.
    pub fn buffers(&self) -> Vec<(usize, &'static str, usize)> {
        let s = self.size * self.size;
        vec![
            (CONV1, "c1", self.act() * 4),
            (CONV1, "workspace", self.in_channels * 9 * s * 4),
            (RELU1, "r1", self.act() * 4),
            (CONV2, "c2", self.act() * 4),
            (CONV2, "workspace", self.channels * 9 * s * 4),
            (RELU2, "r2", self.act() * 4),
            (ADD, "sum", self.act() * 4),
            (HEAD, "features", self.channels * 4),
            (HEAD, "pooled", self.pooled() * 4),
            (HEAD, "workspace", self.size * 4),
            (FC, "logits", self.classes * 4),
        ]
    }
}

impl NetConfig {
    /// Bytes of intermediate `name` (a value of [`Net::graph`] that is
    /// neither the input nor a declared output), for
    /// [`warmarena::session::PlannedRun::prepare`].
    ///
    /// ```
    /// let cfg = warmarena_net::NetConfig::tiny();
    /// assert_eq!(cfg.value_bytes("c1"), Some(4 * 8 * 8 * 4));
    /// assert_eq!(cfg.value_bytes("nope"), None);
    /// ```
    pub fn value_bytes(&self, name: &str) -> Option<usize> {
        self.buffers()
            .into_iter()
            .find(|&(_, what, _)| what == name)
            .map(|(_, _, b)| b)
    }

    /// Bytes of `node`'s workspace (0 for a node without one).
    ///
    /// ```
    /// use warmarena_net::{nodes::*, NetConfig};
    /// let cfg = NetConfig::tiny();
    /// assert_eq!(cfg.workspace_bytes(CONV1), 2 * 9 * 64 * 4);
    /// assert_eq!(cfg.workspace_bytes(RELU1), 0);
    /// ```
    pub fn workspace_bytes(&self, node: usize) -> usize {
        self.buffers()
            .into_iter()
            .find(|&(n, what, _)| n == node && what == "workspace")
            .map_or(0, |(_, _, b)| b)
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetError {
    /// The session refused a call.
    Session(SessionError),
    /// A buffer could not be viewed as `f32`.
    Layout(NotF32),
    /// The input has the wrong number of floats.
    InputLength {
        /// Floats expected.
        expected: usize,
        /// Floats given.
        got: usize,
    },
}

impl From<SessionError> for NetError {
    fn from(e: SessionError) -> Self {
        NetError::Session(e)
    }
}

impl From<NotF32> for NetError {
    fn from(e: NotF32) -> Self {
        NetError::Layout(e)
    }
}

impl core::fmt::Display for NetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NetError::Session(e) => write!(f, "{e}"),
            NetError::Layout(e) => write!(f, "a buffer of {} bytes is not f32-aligned", e.len),
            NetError::InputLength { expected, got } => {
                write!(f, "input has {got} floats, the network takes {expected}")
            }
        }
    }
}

impl std::error::Error for NetError {}

/// A run's outputs, as leases the caller owns.
#[derive(Debug, Clone)]
pub struct NetOutputs {
    /// Per-channel means (`channels` floats).
    pub features: IoLease,
    /// Class scores (`classes` floats).
    pub logits: IoLease,
}

/// The network's weights, for executors other than [`Net::run`].
#[derive(Debug, Clone, Copy)]
pub struct NetWeights<'a> {
    /// conv1 weights, `channels × in_channels × 3 × 3`.
    pub w1: &'a [f32],
    /// conv1 bias.
    pub b1: &'a [f32],
    /// conv2 weights, `channels × channels × 3 × 3`.
    pub w2: &'a [f32],
    /// conv2 bias.
    pub b2: &'a [f32],
    /// fc weights, `pooled × classes`.
    pub wfc: &'a [f32],
}

/// The network: its shape and weights.
#[derive(Debug, Clone)]
pub struct Net {
    /// The shape.
    pub config: NetConfig,
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
    wfc: Vec<f32>,
}

fn weights(n: usize, state: &mut u64, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            ((*state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect()
}

const ALIGN: usize = 64;

impl Net {
    /// A network of shape `config` with weights drawn from `seed`.
    pub fn new(config: NetConfig, seed: u64) -> Net {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let c = config.channels;
        Net {
            w1: weights(c * config.in_channels * 9, &mut s, 0.4),
            b1: weights(c, &mut s, 0.1),
            w2: weights(c * c * 9, &mut s, 0.2),
            b2: weights(c, &mut s, 0.1),
            wfc: weights(config.pooled() * config.classes, &mut s, 0.05),
            config,
        }
    }

    /// The weights.
    pub fn weights(&self) -> NetWeights<'_> {
        NetWeights {
            w1: &self.w1,
            b1: &self.b1,
            w2: &self.w2,
            b2: &self.b2,
            wfc: &self.wfc,
        }
    }

    /// The graph, with node ids as in [`nodes`].
    pub fn graph() -> Graph {
        Graph::new()
            .input("image")
            .node("conv1", &["image"], &["c1"])
            .node("relu1", &["c1"], &["r1"])
            .node("conv2", &["r1"], &["c2"])
            .node("relu2", &["c2"], &["r2"])
            .node("add", &["r1", "r2"], &["sum"])
            .node("head", &["sum"], &["features", "pooled"])
            .node("fc", &["pooled"], &["logits"])
            .output("features")
            .output("logits")
    }

    /// A deterministic input image.
    pub fn example_input(&self, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1;
        weights(self.config.input_len(), &mut s, 2.0)
    }

    /// One run with a borrowed input (no copy): every node's kernel
    /// allocates through `ctx`, intermediates are freed at their last use,
    /// and the two outputs are exported as leases.
    ///
    /// `ctx` is a [`warmarena::session::ArenaRun`] (one arena buffer per
    /// value) or a [`warmarena::session::PlannedRun`] (windows of one
    /// planned block; prepare it with [`NetConfig::value_bytes`] and
    /// [`NetConfig::workspace_bytes`]).
    pub fn run<'i, C: RunMemory<'i>>(
        &self,
        ctx: &mut C,
        image: &'i [f32],
    ) -> Result<NetOutputs, NetError> {
        if image.len() != self.config.input_len() {
            return Err(NetError::InputLength {
                expected: self.config.input_len(),
                got: image.len(),
            });
        }
        ctx.borrow_input("image", as_bytes(image))?;
        self.execute(ctx)?;
        Ok(NetOutputs {
            features: ctx.take_output("features")?,
            logits: ctx.take_output("logits")?,
        })
    }

    /// Runs every node, given that `image` is set in `ctx`.
    pub fn execute<'i, C: RunMemory<'i>>(&self, ctx: &mut C) -> Result<(), NetError> {
        let cfg = self.config;
        let (c, h, w) = (cfg.channels, cfg.size, cfg.size);
        let act = cfg.act() * 4;
        self.conv(ctx, CONV1, cfg.in_channels, &self.w1, &self.b1)?;
        self.unary(ctx, RELU1, act, kernels::relu)?;
        self.conv(ctx, CONV2, c, &self.w2, &self.b2)?;
        self.unary(ctx, RELU2, act, kernels::relu)?;
        {
            let mut y = ctx.output(ADD, 0, act, ALIGN)?;
            kernels::add(
                f32s(ctx.input(ADD, 0)?)?,
                f32s(ctx.input(ADD, 1)?)?,
                f32s_mut(y.as_mut_slice())?,
            );
            ctx.commit(ADD, 0, y)?;
            ctx.finish(ADD)?;
        }
        {
            let mut features = ctx.output(HEAD, 0, c * 4, ALIGN)?;
            let mut pooled = ctx.output(HEAD, 1, cfg.pooled() * 4, ALIGN)?;
            let mut ws = ctx.workspace(HEAD, w * 4, ALIGN)?;
            kernels::head(
                f32s(ctx.input(HEAD, 0)?)?,
                c,
                h,
                w,
                f32s_mut(features.as_mut_slice())?,
                f32s_mut(pooled.as_mut_slice())?,
                f32s_mut(ws.as_mut_slice())?,
            );
            drop(ws);
            ctx.commit(HEAD, 0, features)?;
            ctx.commit(HEAD, 1, pooled)?;
            ctx.finish(HEAD)?;
        }
        {
            let mut y = ctx.output(FC, 0, cfg.classes * 4, ALIGN)?;
            kernels::matmul(
                f32s(ctx.input(FC, 0)?)?,
                &self.wfc,
                1,
                cfg.pooled(),
                cfg.classes,
                f32s_mut(y.as_mut_slice())?,
            );
            ctx.commit(FC, 0, y)?;
            ctx.finish(FC)?;
        }
        Ok(())
    }

    fn conv<'i, C: RunMemory<'i>>(
        &self,
        ctx: &mut C,
        node: NodeId,
        c_in: usize,
        wt: &[f32],
        b: &[f32],
    ) -> Result<(), NetError> {
        let cfg = self.config;
        let (h, w) = (cfg.size, cfg.size);
        let mut y = ctx.output(node, 0, cfg.act() * 4, ALIGN)?;
        let mut ws = ctx.workspace(node, c_in * 9 * h * w * 4, ALIGN)?;
        kernels::conv3x3(
            f32s(ctx.input(node, 0)?)?,
            c_in,
            h,
            w,
            wt,
            b,
            cfg.channels,
            f32s_mut(y.as_mut_slice())?,
            f32s_mut(ws.as_mut_slice())?,
        );
        drop(ws);
        ctx.commit(node, 0, y)?;
        ctx.finish(node)?;
        Ok(())
    }

    fn unary<'i, C: RunMemory<'i>>(
        &self,
        ctx: &mut C,
        node: NodeId,
        bytes: usize,
        f: fn(&[f32], &mut [f32]),
    ) -> Result<(), NetError> {
        let mut y = ctx.output(node, 0, bytes, ALIGN)?;
        f(f32s(ctx.input(node, 0)?)?, f32s_mut(y.as_mut_slice())?);
        ctx.commit(node, 0, y)?;
        ctx.finish(node)?;
        Ok(())
    }

    /// The same network on plain `Vec`s: `(features, logits)`.
    pub fn reference(&self, image: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let cfg = self.config;
        let (c, h, w) = (cfg.channels, cfg.size, cfg.size);
        let mut ws = vec![0.0; c.max(cfg.in_channels) * 9 * h * w];
        let mut c1 = vec![0.0; cfg.act()];
        kernels::conv3x3(
            image,
            cfg.in_channels,
            h,
            w,
            &self.w1,
            &self.b1,
            c,
            &mut c1,
            &mut ws[..cfg.in_channels * 9 * h * w],
        );
        let mut r1 = vec![0.0; cfg.act()];
        kernels::relu(&c1, &mut r1);
        let mut c2 = vec![0.0; cfg.act()];
        kernels::conv3x3(
            &r1,
            c,
            h,
            w,
            &self.w2,
            &self.b2,
            c,
            &mut c2,
            &mut ws[..c * 9 * h * w],
        );
        let mut r2 = vec![0.0; cfg.act()];
        kernels::relu(&c2, &mut r2);
        let mut sum = vec![0.0; cfg.act()];
        kernels::add(&r1, &r2, &mut sum);
        let mut features = vec![0.0; c];
        let mut pooled = vec![0.0; cfg.pooled()];
        let mut row = vec![0.0; w];
        kernels::head(&sum, c, h, w, &mut features, &mut pooled, &mut row);
        let mut logits = vec![0.0; cfg.classes];
        kernels::matmul(
            &pooled,
            &self.wfc,
            1,
            cfg.pooled(),
            cfg.classes,
            &mut logits,
        );
        (features, logits)
    }
}
