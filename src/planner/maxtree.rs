//! Range raise and range max over time sections, for the skyline (the
//! highest top placed over a buffer's life) and for validation (the
//! highest top below an offset over a buffer's life).

/// Range "raise to at least v" and range max over `n` leaves, bottom up:
/// `node[k] = [max, tag]`, `max` the largest value in node `k`'s subtree,
/// `tag` a raise applied to all of it (a node and its sibling share a cache
/// line). Every node covering part of a query range has its pending raises
/// on the paths from the two boundary leaves to the root.
pub(crate) struct MaxTree {
    n: usize,
    node: Vec<[usize; 2]>,
}

impl MaxTree {
    pub(crate) fn new(leaves: usize) -> Self {
        let n = leaves.max(1).next_power_of_two();
        MaxTree {
            n,
            node: vec![[0; 2]; 2 * n],
        }
    }

    pub(crate) fn raise(&mut self, l: usize, r: usize, v: usize) {
        if l >= r {
            return;
        }
        // Ancestors of the two boundary leaves first, while every node's
        // max is still at least its children's: a node already at `v`
        // has its ancestors there too.
        for leaf in [l + self.n, r - 1 + self.n] {
            let mut k = leaf >> 1;
            while k >= 1 && self.node[k][0] < v {
                self.node[k][0] = v;
                k >>= 1;
            }
        }
        let (mut a, mut b) = (l + self.n, r + self.n);
        while a < b {
            if a & 1 == 1 {
                let x = &mut self.node[a];
                x[0] = x[0].max(v);
                x[1] = x[1].max(v);
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                let x = &mut self.node[b];
                x[0] = x[0].max(v);
                x[1] = x[1].max(v);
            }
            a >>= 1;
            b >>= 1;
        }
    }

    pub(crate) fn query(&self, l: usize, r: usize) -> usize {
        if l >= r {
            return 0;
        }
        // `node.len()` is a power of two: masking every index with `mask`
        // (a no-op) lets the compiler drop the bounds checks.
        let node = &self.node[..];
        let mask = node.len() - 1;
        let mut res = 0;
        let (mut a, mut b) = (l + self.n, r + self.n);
        while a < b {
            if a & 1 == 1 {
                res = res.max(node[a & mask][0]);
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                res = res.max(node[b & mask][0]);
            }
            a >>= 1;
            b >>= 1;
        }
        // Raises pending above: the two boundary paths, one above where
        // they meet.
        let (mut x, mut y) = ((l + self.n) >> 1, (r - 1 + self.n) >> 1);
        while x != y {
            res = res.max(node[x & mask][1]).max(node[y & mask][1]);
            x >>= 1;
            y >>= 1;
        }
        while x >= 1 {
            res = res.max(node[x & mask][1]);
            x >>= 1;
        }
        res
    }

    /// The value at section `s` (its leaf and the raises above it).
    pub(crate) fn point(&self, s: usize) -> usize {
        let node = &self.node[..];
        let mask = node.len() - 1;
        let mut k = s + self.n;
        let mut res = node[k & mask][0];
        k >>= 1;
        while k >= 1 {
            res = res.max(node[k & mask][1]);
            k >>= 1;
        }
        res
    }

    /// [`query`](Self::query) and a section of `[l, r)` holding that
    /// largest value (a *witness*: while its value stays the range's
    /// largest, a point query there answers the range).
    pub(crate) fn query_witness(&self, l: usize, r: usize) -> (usize, usize) {
        if l >= r {
            return (0, l);
        }
        let node = &self.node[..];
        let mask = node.len() - 1;
        // The best so far and the node it came from (a canonical node, to
        // descend from; or a boundary leaf, under a raise on its path).
        let (mut res, mut from) = (0, l + self.n);
        let (mut a, mut b) = (l + self.n, r + self.n);
        while a < b {
            if a & 1 == 1 {
                if node[a & mask][0] > res {
                    (res, from) = (node[a & mask][0], a);
                }
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                if node[b & mask][0] > res {
                    (res, from) = (node[b & mask][0], b);
                }
            }
            a >>= 1;
            b >>= 1;
        }
        let (mut x, mut y) = ((l + self.n) >> 1, (r - 1 + self.n) >> 1);
        while x >= 1 {
            if node[x & mask][1] > res {
                (res, from) = (node[x & mask][1], l + self.n);
            }
            if x != y && node[y & mask][1] > res {
                (res, from) = (node[y & mask][1], r - 1 + self.n);
            }
            x >>= 1;
            y >>= 1;
        }
        // Down to a leaf by the larger child: a raise covering a node
        // covers every leaf below it, else the larger child holds the max.
        while from < self.n {
            let (c0, c1) = (node[(2 * from) & mask][0], node[(2 * from + 1) & mask][0]);
            from = 2 * from + usize::from(c1 > c0);
        }
        (res, from - self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_matches_a_plain_array() {
        let mut tree = MaxTree::new(37);
        let mut plain = [0usize; 37];
        let mut seed = 7u64;
        for step in 0..if cfg!(miri) { 300 } else { 2000 } {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let l = (seed >> 33) as usize % 37;
            let r = l + 1 + (seed >> 40) as usize % (37 - l);
            if step % 2 == 0 {
                let v = (seed >> 20) as usize % 100;
                tree.raise(l, r, v);
                for x in &mut plain[l..r] {
                    *x = (*x).max(v);
                }
            } else {
                let want = plain[l..r].iter().copied().max().unwrap();
                assert_eq!(tree.query(l, r), want);
                let (got, w) = tree.query_witness(l, r);
                assert_eq!(got, want);
                assert!((l..r).contains(&w) && plain[w] == want && tree.point(w) == want);
            }
        }
    }
}
