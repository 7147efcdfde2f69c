//! The hasher of the arena's address-keyed maps: the keys are distinct
//! integers (buffer addresses, run numbers) whose low bits carry no
//! information past a known shift, so one multiply by an odd constant,
//! after dropping those bits, spreads them over the low bits a table
//! indexes by.

use core::hash::Hasher;

/// Hashes a `usize` key as `(key >> SHIFT) * C` (C odd); other input byte
/// by byte.
#[derive(Default)]
pub(crate) struct MulHasher<const SHIFT: u32>(u64);

const C: u64 = 0x9E37_79B9_7F4A_7C15;

impl<const SHIFT: u32> Hasher for MulHasher<SHIFT> {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(C);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> SHIFT).wrapping_mul(C);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::BuildHasherDefault;
    use std::collections::HashMap;

    fn low_bits<const S: u32>(key: usize) -> u64 {
        let mut h = MulHasher::<S>::default();
        h.write_usize(key);
        h.finish() & 1023
    }

    fn distinct(v: impl Iterator<Item = u64>) -> usize {
        let mut v: Vec<u64> = v.collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    }

    #[test]
    fn consecutive_keys_land_in_distinct_low_bits() {
        // 16-byte-aligned addresses with a shift of 4, run numbers whole:
        // 1024 consecutive keys fill all 1024 values of the low 10 bits.
        assert_eq!(distinct((0..1024).map(|k| low_bits::<4>(k << 4))), 1024);
        assert_eq!(distinct((0..1024).map(low_bits::<0>)), 1024);
        let mut m: HashMap<usize, u32, BuildHasherDefault<MulHasher<4>>> = HashMap::default();
        m.insert(4096, 1);
        assert_eq!(m.get(&4096), Some(&1));
    }
}
