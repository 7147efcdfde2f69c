//! DLPack export: an [`IoLease`] handed to any DLPack consumer (NumPy,
//! PyTorch, JAX, a C library) as a `DLManagedTensorVersioned` (DLPack 1.x,
//! CPU device) whose deleter returns the lease.
//!
//! The C structs are defined here from the DLPack specification (they are a
//! handful of `repr(C)` types and a version pair), which keeps the crate free
//! of a binding crate for so little.
//!
//! ```
//! use warmarena::handle::dlpack::{DLDataType, DLPACK_FLAG_READ_ONLY};
//! let io = warmarena::IoArena::new();
//! let mut a = io.allocate(6 * 4, 64).unwrap();
//! a.as_mut_slice()[..4].copy_from_slice(&1.5f32.to_ne_bytes());
//! let t = a.into_lease().unwrap().into_dlpack(DLDataType::F32, &[2, 3]).unwrap();
//! // SAFETY: `t` is a live tensor from `into_dlpack`; the deleter is called once.
//! unsafe {
//!     let m = t.as_ptr();
//!     assert_eq!((*m).dl_tensor.ndim, 2);
//!     assert_eq!(*((*m).dl_tensor.data as *const f32), 1.5);
//!     assert_eq!((*m).flags & DLPACK_FLAG_READ_ONLY, 0);
//!     ((*m).deleter.unwrap())(m);
//! }
//! assert_eq!(io.stats().leases, 0);
//! ```

use super::IoLease;
use core::ffi::c_void;
use core::ptr::NonNull;

/// The DLPack ABI version this module produces.
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 0 };

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the data.
pub const DLPACK_FLAG_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer copied the data for this export.
pub const DLPACK_FLAG_IS_COPIED: u64 = 1 << 1;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    /// ABI-breaking version.
    pub major: u32,
    /// Compatible additions.
    pub minor: u32,
}

/// `kDLCPU`.
pub const DL_CPU: i32 = 1;

/// `DLDevice`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// `DLDeviceType` (`kDLCPU` = 1).
    pub device_type: i32,
    /// Device ordinal.
    pub device_id: i32,
}

/// `DLDataType`: type code, bits per lane, lanes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// `kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2, `kDLBfloat` 4, `kDLBool` 6.
    pub code: u8,
    /// Bits per element.
    pub bits: u8,
    /// Vector lanes (1 for scalars).
    pub lanes: u16,
}

impl DLDataType {
    /// 32-bit float.
    pub const F32: DLDataType = DLDataType {
        code: 2,
        bits: 32,
        lanes: 1,
    };
    /// 16-bit float.
    pub const F16: DLDataType = DLDataType {
        code: 2,
        bits: 16,
        lanes: 1,
    };
    /// 64-bit float.
    pub const F64: DLDataType = DLDataType {
        code: 2,
        bits: 64,
        lanes: 1,
    };
    /// 64-bit signed integer.
    pub const I64: DLDataType = DLDataType {
        code: 0,
        bits: 64,
        lanes: 1,
    };
    /// 32-bit signed integer.
    pub const I32: DLDataType = DLDataType {
        code: 0,
        bits: 32,
        lanes: 1,
    };
    /// 8-bit unsigned integer.
    pub const U8: DLDataType = DLDataType {
        code: 1,
        bits: 8,
        lanes: 1,
    };
    /// Boolean, one byte each.
    pub const BOOL: DLDataType = DLDataType {
        code: 6,
        bits: 8,
        lanes: 1,
    };

    /// Bytes per element, if whole.
    pub fn bytes(&self) -> Option<usize> {
        let bits = self.bits as usize * self.lanes as usize;
        (bits % 8 == 0 && bits > 0).then_some(bits / 8)
    }
}

/// `DLTensor`.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The data (the lease's first byte).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// Null: compact row-major.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensorVersioned`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The ABI version.
    pub version: DLPackVersion,
    /// The producer's context (here: the export record owning the lease).
    pub manager_ctx: *mut c_void,
    /// Called by the consumer once, when done.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// Why an export was refused (the lease is dropped with the error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DlpackError {
    /// The dtype's element size is not a whole number of bytes.
    BadDtype,
    /// A negative extent, too many dimensions, or a size that overflows.
    BadShape,
    /// The shape needs more bytes than the lease holds.
    TooLarge {
        /// Bytes the shape needs.
        needed: usize,
        /// Bytes the lease holds.
        available: usize,
    },
}

impl core::fmt::Display for DlpackError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DlpackError::BadDtype => write!(f, "dtype is not a whole number of bytes"),
            DlpackError::BadShape => write!(f, "shape has a negative extent or overflows"),
            DlpackError::TooLarge { needed, available } => {
                write!(
                    f,
                    "shape needs {needed} bytes, the buffer holds {available}"
                )
            }
        }
    }
}

impl std::error::Error for DlpackError {}

/// What `manager_ctx` points to: the tensor, its shape, and the owner.
#[repr(C)]
struct Export {
    tensor: DLManagedTensorVersioned,
    shape: Box<[i64]>,
    lease: IoLease,
}

unsafe extern "C" fn delete_export(t: *mut DLManagedTensorVersioned) {
    if t.is_null() {
        return;
    }
    // SAFETY: `t` is the first field of an `Export` boxed by `into_dlpack`
    // (repr(C)), and DLPack calls the deleter once.
    drop(unsafe { Box::from_raw(t as *mut Export) });
}

impl IoLease {
    /// Hands this owner to a DLPack consumer without copying: the tensor's
    /// data is the lease's buffer, dtype and shape are the caller's
    /// (compact row-major), and the tensor's deleter returns the lease. The
    /// tensor is marked read-only unless this lease was the only owner.
    pub fn into_dlpack(
        self,
        dtype: DLDataType,
        shape: &[i64],
    ) -> Result<NonNull<DLManagedTensorVersioned>, DlpackError> {
        let elem = dtype.bytes().ok_or(DlpackError::BadDtype)?;
        let ndim = i32::try_from(shape.len()).map_err(|_| DlpackError::BadShape)?;
        let mut count: usize = 1;
        for &d in shape {
            let d = usize::try_from(d).map_err(|_| DlpackError::BadShape)?;
            count = count.checked_mul(d).ok_or(DlpackError::BadShape)?;
        }
        let needed = count.checked_mul(elem).ok_or(DlpackError::BadShape)?;
        if needed > self.len() {
            return Err(DlpackError::TooLarge {
                needed,
                available: self.len(),
            });
        }
        let flags = if self.owners() == 1 {
            0
        } else {
            DLPACK_FLAG_READ_ONLY
        };
        let mut shape: Box<[i64]> = shape.into();
        let export = Box::new(Export {
            tensor: DLManagedTensorVersioned {
                version: DLPACK_VERSION,
                manager_ctx: core::ptr::null_mut(),
                deleter: Some(delete_export),
                flags,
                dl_tensor: DLTensor {
                    data: self.as_ptr() as *mut c_void,
                    device: DLDevice {
                        device_type: DL_CPU,
                        device_id: 0,
                    },
                    ndim,
                    dtype,
                    shape: shape.as_mut_ptr(),
                    strides: core::ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            shape,
            lease: self,
        });
        let raw = Box::into_raw(export);
        // SAFETY: `raw` is a valid, uniquely owned Export.
        unsafe { (*raw).tensor.manager_ctx = raw as *mut c_void };
        // SAFETY: Box::into_raw never returns null; the tensor is the first field.
        Ok(unsafe { NonNull::new_unchecked(raw as *mut DLManagedTensorVersioned) })
    }
}
