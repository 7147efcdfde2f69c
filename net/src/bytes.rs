//! Viewing arena bytes as `f32` without copying.

/// Why bytes cannot be viewed as `f32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotF32 {
    /// The byte length.
    pub len: usize,
}

/// The bytes as `f32`s: they must be 4-byte aligned and a whole number of floats.
///
/// ```
/// let v = [0u32; 4];
/// // SAFETY of the example: viewing a u32 array's bytes.
/// let b = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, 16) };
/// assert_eq!(warmarena_net::bytes::f32s(b).unwrap().len(), 4);
/// assert!(warmarena_net::bytes::f32s(&b[1..5]).is_err());
/// ```
pub fn f32s(b: &[u8]) -> Result<&[f32], NotF32> {
    if b.as_ptr() as usize % 4 != 0 || b.len() % 4 != 0 {
        return Err(NotF32 { len: b.len() });
    }
    // SAFETY: aligned for f32, length a multiple of 4, and every bit
    // pattern is a valid f32; the borrow is carried over.
    Ok(unsafe { core::slice::from_raw_parts(b.as_ptr() as *const f32, b.len() / 4) })
}

/// The bytes as mutable `f32`s (same conditions as [`f32s`]).
///
/// ```
/// let mut v = [0u32; 2];
/// // SAFETY of the example: viewing a u32 array's bytes.
/// let b = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, 8) };
/// warmarena_net::bytes::f32s_mut(b).unwrap()[1] = 1.0;
/// assert_eq!(v[1], 1.0f32.to_bits());
/// ```
pub fn f32s_mut(b: &mut [u8]) -> Result<&mut [f32], NotF32> {
    if b.as_ptr() as usize % 4 != 0 || b.len() % 4 != 0 {
        return Err(NotF32 { len: b.len() });
    }
    // SAFETY: as in `f32s`, with the unique borrow carried over.
    Ok(unsafe { core::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut f32, b.len() / 4) })
}

/// Bytes of a float slice (for borrowing `f32` inputs).
///
/// ```
/// let x = [1.0f32, 2.0];
/// assert_eq!(warmarena_net::bytes::as_bytes(&x).len(), 8);
/// ```
pub fn as_bytes(x: &[f32]) -> &[u8] {
    // SAFETY: any f32 is 4 initialized bytes; the borrow is carried over.
    unsafe { core::slice::from_raw_parts(x.as_ptr() as *const u8, core::mem::size_of_val(x)) }
}
