//! Why a scratch request was refused. A refusal leaves every buffer the pool
//! held as it was.

use super::device::{DeviceError, DeviceId};

/// A refused engine creation, claim or registration.
///
/// ```
/// use warmarena::scratch::{EngineScratch, ScratchError, ScratchMode};
/// let engine = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
/// assert_eq!(
///     engine.claim(0).unwrap_err(),
///     ScratchError::ZeroRequest { requirement: 4096 }
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScratchError {
    /// A request of zero bytes from an engine that recorded a non-zero
    /// requirement at creation: a failed size query, never a reason to hand
    /// back whatever buffer the engine saw last.
    ZeroRequest {
        /// The requirement recorded at creation.
        requirement: usize,
    },
    /// A request above the requirement recorded at creation. Private mode
    /// could not serve it from the engine's own buffer, so neither mode does.
    ExceedsRequirement {
        /// Bytes asked for.
        requested: usize,
        /// The requirement recorded at creation.
        requirement: usize,
    },
    /// The device could not allocate; the previous buffer, if any, is kept
    /// and still serves smaller requests.
    Device(DeviceError),
    /// No device with this id is registered (the host is registered on
    /// first use).
    UnknownDevice(DeviceId),
    /// A device with this id is already registered.
    AlreadyRegistered(DeviceId),
    /// The mode setting (`WARMARENA_SCRATCH`) holds something other than
    /// `shared` or `private`.
    BadModeSetting,
    /// The heap refused room for the pool's own bookkeeping.
    MetadataOutOfMemory,
}

impl From<DeviceError> for ScratchError {
    fn from(e: DeviceError) -> Self {
        ScratchError::Device(e)
    }
}

impl core::fmt::Display for ScratchError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ScratchError::ZeroRequest { requirement } => write!(
                f,
                "scratch request of 0 bytes from an engine that needs {requirement} (failed size query?)"
            ),
            ScratchError::ExceedsRequirement {
                requested,
                requirement,
            } => write!(
                f,
                "scratch request of {requested} bytes exceeds the engine's recorded requirement of {requirement}"
            ),
            ScratchError::Device(e) => write!(f, "scratch device error: {e}"),
            ScratchError::UnknownDevice(d) => write!(f, "no scratch device {} is registered", d.0),
            ScratchError::AlreadyRegistered(d) => {
                write!(f, "scratch device {} is already registered", d.0)
            }
            ScratchError::BadModeSetting => write!(
                f,
                "{} must be `shared` or `private`",
                super::engine::MODE_ENV_VAR
            ),
            ScratchError::MetadataOutOfMemory => {
                write!(f, "out of memory for scratch pool bookkeeping")
            }
        }
    }
}

impl std::error::Error for ScratchError {}
