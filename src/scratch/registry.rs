//! An append-only map for the pool's registries (devices, and lanes within
//! a device).
//!
//! Finding an entry takes the map's lock once, scans a short vector and
//! clones an `Arc`: no allocation, no system call and no wait happen under
//! the lock. Inserting builds the new entry and the grown vector outside the
//! lock and only swaps them in under it (retrying if another insert won the
//! race), so the old vector is also dropped outside. Entries are never
//! removed, so an `Arc` handed out stays the map's entry for good.

use super::error::ScratchError;
use super::sync::{lock, Arc, Mutex};

pub(crate) struct AppendMap<K, V> {
    entries: Mutex<Vec<(K, Arc<V>)>>,
}

impl<K: Copy + Eq, V> AppendMap<K, V> {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        AppendMap {
            entries: Mutex::new(Vec::new()),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        AppendMap {
            entries: Mutex::new(Vec::new()),
        }
    }

    /// The entry for `key`, if any.
    pub(crate) fn get(&self, key: K) -> Option<Arc<V>> {
        let entries = lock(&self.entries);
        entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| Arc::clone(v))
    }

    /// The entry for `key`, inserting `make()` if there is none. The bool
    /// says whether this call inserted (false: someone else's entry won).
    pub(crate) fn get_or_insert_with(
        &self,
        key: K,
        make: impl FnOnce() -> V,
    ) -> Result<(Arc<V>, bool), ScratchError> {
        if let Some(v) = self.get(key) {
            return Ok((v, false));
        }
        let fresh = Arc::new(make());
        loop {
            let seen = lock(&self.entries).len();
            let mut grown: Vec<(K, Arc<V>)> = Vec::new();
            grown
                .try_reserve_exact(seen + 1)
                .map_err(|_| ScratchError::MetadataOutOfMemory)?;
            let old = {
                let mut entries = lock(&self.entries);
                if let Some((_, v)) = entries.iter().find(|(k, _)| *k == key) {
                    return Ok((Arc::clone(v), false));
                }
                if entries.len() != seen {
                    // Another insert landed since we sized `grown`: resize.
                    continue;
                }
                // Within the reserved capacity: these pushes do not allocate.
                grown.extend(entries.iter().map(|(k, v)| (*k, Arc::clone(v))));
                grown.push((key, Arc::clone(&fresh)));
                core::mem::replace(&mut *entries, grown)
            };
            drop(old);
            return Ok((fresh, true));
        }
    }

    /// A copy of every entry, in insertion order.
    pub(crate) fn snapshot(&self) -> Vec<(K, Arc<V>)> {
        let entries = lock(&self.entries);
        entries.iter().map(|(k, v)| (*k, Arc::clone(v))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_and_never_replaced() {
        let m: AppendMap<u32, String> = AppendMap::new();
        assert!(m.get(1).is_none());
        let (a, inserted) = m.get_or_insert_with(1, || "one".to_string()).unwrap();
        assert!(inserted);
        let (b, inserted) = m.get_or_insert_with(1, || "uno".to_string()).unwrap();
        assert!(!inserted);
        assert!(Arc::ptr_eq(&a, &b));
        for k in 2..=40 {
            m.get_or_insert_with(k, || k.to_string()).unwrap();
        }
        assert!(Arc::ptr_eq(&a, &m.get(1).unwrap()));
        assert_eq!(m.snapshot().len(), 40);
    }

    #[test]
    fn racing_inserts_agree_on_one_entry() {
        let m: AppendMap<u32, u32> = AppendMap::new();
        let winners: Vec<Arc<u32>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|t| {
                    let m = &m;
                    s.spawn(move || {
                        for k in 0..16 {
                            m.get_or_insert_with(k, || t).unwrap();
                        }
                        m.get(7).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(winners.iter().all(|w| Arc::ptr_eq(w, &winners[0])));
        assert_eq!(m.snapshot().len(), 16);
    }
}
