//! What of an address range is resident, and how: on huge pages, or on
//! base pages that khugepaged may collapse under the program (a page fault
//! the allocator did not ask for; docs/design/arena.md, "Huge pages").

use core::ops::Range;

/// Resident bytes of the mappings that overlap a range, read from
/// `/proc/self/smaps` by [`huge_page_residency`]. Whole mappings are
/// counted: the kernel reports no finer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Residency {
    /// Bytes on huge pages (`AnonHugePages`).
    pub huge: u64,
    /// Bytes on base pages in mappings eligible for huge pages
    /// (`THPeligible: 1`): what khugepaged may collapse, copying the pages
    /// while the program writes them. 0 is what an arena promises for its
    /// own memory.
    pub collapsible: u64,
    /// Every resident byte (`Rss`).
    pub resident: u64,
}

/// Reads how the mappings overlapping `range` are resident; `None` where
/// `/proc/self/smaps` cannot be read (off Linux, or without `/proc`).
///
/// ```
/// use warmarena::faults::huge_page_residency;
/// let v = vec![1u8; 1 << 20];
/// let at = v.as_ptr() as usize;
/// if let Some(r) = huge_page_residency(at..at + v.len()) {
///     assert!(r.resident > 0, "{r:?}");
///     assert!(r.huge + r.collapsible <= r.resident);
/// }
/// ```
pub fn huge_page_residency(range: Range<usize>) -> Option<Residency> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    Some(sum_overlapping(&smaps, &range))
}

/// [`huge_page_residency`] over the text of an smaps file.
fn sum_overlapping(smaps: &str, range: &Range<usize>) -> Residency {
    let kib = |l: &str| {
        l.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            << 10
    };
    let mut sum = Residency::default();
    let (mut inside, mut rss, mut huge) = (false, 0, 0);
    for l in smaps.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let lo = usize::from_str_radix(lo, 16).unwrap_or(0);
            let hi = usize::from_str_radix(hi, 16).unwrap_or(0);
            inside = lo < range.end && range.start < hi;
            (rss, huge) = (0, 0);
        } else if !inside {
            continue;
        } else if l.starts_with("Rss:") {
            rss = kib(l);
            sum.resident += rss;
        } else if l.starts_with("AnonHugePages:") {
            huge = kib(l);
            sum.huge += huge;
        } else if l.starts_with("THPeligible:") && l.split_whitespace().nth(1) == Some("1") {
            sum.collapsible += rss.saturating_sub(huge);
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
7f0000000000-7f0000400000 rw-p 00000000 00:00 0 
Size:               4096 kB
Rss:                3072 kB
AnonHugePages:      2048 kB
THPeligible:        1
7f0000400000-7f0000600000 rw-p 00000000 00:00 0 
Size:               2048 kB
Rss:                 512 kB
AnonHugePages:         0 kB
THPeligible:        0
7f0000800000-7f0000a00000 rw-p 00000000 00:00 0 
Rss:                2048 kB
AnonHugePages:         0 kB
THPeligible:        1
";

    #[test]
    fn the_mappings_overlapping_a_range_are_summed() {
        let all = sum_overlapping(SMAPS, &(0x7f00_0000_0000..0x7f00_00a0_0000));
        assert_eq!(
            all,
            Residency {
                huge: 2 << 20,
                collapsible: (1 << 20) + (2 << 20),
                resident: (3 << 20) + (512 << 10) + (2 << 20),
            }
        );
        // Only the second mapping: base pages, not eligible.
        let second = sum_overlapping(SMAPS, &(0x7f00_0040_0000..0x7f00_0040_1000));
        assert_eq!(
            second,
            Residency {
                huge: 0,
                collapsible: 0,
                resident: 512 << 10,
            }
        );
        // Between mappings: nothing.
        let gap = sum_overlapping(SMAPS, &(0x7f00_0060_0000..0x7f00_0080_0000));
        assert_eq!(gap, Residency::default());
    }
}
