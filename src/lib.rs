//! warmarena: the memory layer of an ML inference runtime.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod planner;
