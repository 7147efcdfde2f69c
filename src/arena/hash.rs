//! The hasher of the arena's address-keyed maps: the keys are distinct
//! integers (buffer addresses, run numbers) whose low bits carry no
//! information past a known shift. One full-width multiply by an odd
//! constant, after dropping those bits, with the product's two halves
//! xored, spreads every key bit over both the low bits a table indexes by
//! and the top bits hashbrown tags entries with. (The low half alone is not
//! enough: page-aligned addresses, the heap's and every large buffer's,
//! would start their probes in 1/256 of the buckets or fewer.)

use core::hash::Hasher;

/// Hashes a `usize` key as the folded product `(key >> SHIFT) * C` (C
/// odd, see [`fold_mul`]); other input byte by byte.
#[derive(Default)]
pub(crate) struct MulHasher<const SHIFT: u32>(u64);

const C: u64 = 0x9E37_79B9_7F4A_7C15;

/// The 128-bit product of `x` and [`C`], its halves xored: every bit of
/// `x` reaches both the low bits (the table's index) and the top seven
/// (hashbrown's tag). A plain 64-bit product leaves the low `k` bits zero
/// for keys that are multiples of `2^k`: page-aligned addresses then all
/// start their probe in 1/256 of the buckets.
#[inline(always)]
fn fold_mul(x: u64) -> u64 {
    let p = u128::from(x) * u128::from(C);
    (p as u64) ^ ((p >> 64) as u64)
}

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
        self.0 = fold_mul((n as u64) >> SHIFT);
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

    /// Keys `k * stride` for k in 1..=1024: how many distinct values
    /// the low 10 bits (a 1024-bucket table's index) take.
    fn spread<const S: u32>(stride: usize) -> usize {
        distinct((1..=1024).map(|k| low_bits::<S>(k * stride)))
    }

    #[test]
    fn aligned_keys_spread_over_the_low_bits() {
        // Random placement of 1024 keys in 1024 buckets fills about 647;
        // the plain product filled 4 for page-aligned keys and 1 from
        // 64 KiB up, so every probe of those started in one group.
        for stride in [16, 4096, 64 << 10, 2 << 20, 1 << 30] {
            let n = spread::<4>(stride);
            assert!(n >= 600, "stride {stride}: {n} of 1024 buckets");
        }
        // Run numbers: consecutive integers, unshifted.
        assert!(spread::<0>(1) >= 600);
        let mut m: HashMap<usize, u32, BuildHasherDefault<MulHasher<4>>> = HashMap::default();
        m.insert(4096, 1);
        assert_eq!(m.get(&4096), Some(&1));
    }

    #[test]
    fn the_tag_bits_differ_for_aligned_keys() {
        // hashbrown compares the top 7 bits before the key: keys that
        // share them cost a key comparison each.
        for stride in [16usize, 4096, 2 << 20] {
            let tags = distinct((1..=1024).map(|k| {
                let mut h = MulHasher::<4>::default();
                h.write_usize(k * stride);
                h.finish() >> 57
            }));
            assert_eq!(tags, 128, "stride {stride}");
        }
    }
}
