//! Records keyed by id, with containerd's truncated-id lookup and an index of their labels, so
//! a label-filtered list (the kubelet asks per pod UID) reads only the matching records instead
//! of every record: listing each of n pods stays O(n) in all, not O(n²). CRI labels never change
//! after creation, so the index is kept on insert and remove only.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Deref;

/// What the index needs of a record.
pub(crate) trait Labelled {
    fn labels(&self) -> &HashMap<String, String>;
}

#[derive(Debug)]
pub(crate) struct Records<V> {
    by_id: BTreeMap<String, V>,
    by_label: HashMap<(String, String), BTreeSet<String>>,
}

impl<V> Default for Records<V> {
    fn default() -> Self {
        Self { by_id: BTreeMap::new(), by_label: HashMap::new() }
    }
}

/// Reads go straight to the map; writes go through [`Records::insert`] and
/// [`Records::remove`], which keep the index (there is no `DerefMut`).
impl<V> Deref for Records<V> {
    type Target = BTreeMap<String, V>;

    fn deref(&self) -> &Self::Target {
        &self.by_id
    }
}

impl<V: Labelled> Records<V> {
    pub(crate) fn insert(&mut self, id: String, record: V) {
        self.remove(&id);
        for (k, v) in record.labels() {
            self.by_label.entry((k.clone(), v.clone())).or_default().insert(id.clone());
        }
        self.by_id.insert(id, record);
    }

    pub(crate) fn remove(&mut self, id: &str) -> Option<V> {
        let record = self.by_id.remove(id)?;
        self.unindex(id, &record);
        Some(record)
    }

    fn unindex(&mut self, id: &str, record: &V) {
        for (k, v) in record.labels() {
            let key = (k.clone(), v.clone());
            if let Some(ids) = self.by_label.get_mut(&key) {
                ids.remove(id);
                if ids.is_empty() {
                    self.by_label.remove(&key);
                }
            }
        }
    }

    /// A record to change in place: anything but its labels, which are fixed at creation.
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        self.by_id.get_mut(id)
    }

    /// Resolves an id or a unique id prefix, as containerd's truncated-id index does.
    pub(crate) fn resolve(&self, id: &str) -> Option<&str> {
        if id.is_empty() {
            return None;
        }
        let mut hits = self.by_id.range(id.to_string()..).take_while(|(k, _)| k.starts_with(id));
        match (hits.next(), hits.next()) {
            (Some((k, _)), None) => Some(k.as_str()),
            _ => None,
        }
    }

    /// The records carrying every label of `selector`, in id order: those under the rarest of
    /// its labels, checked for the rest. Every record when the selector is empty.
    pub(crate) fn matching<'a>(
        &'a self,
        selector: &'a HashMap<String, String>,
    ) -> Box<dyn Iterator<Item = &'a V> + 'a> {
        if selector.is_empty() {
            return Box::new(self.by_id.values());
        }
        let mut smallest: Option<&BTreeSet<String>> = None;
        for (k, v) in selector {
            let Some(ids) = self.by_label.get(&(k.clone(), v.clone())) else {
                return Box::new(std::iter::empty());
            };
            if smallest.is_none_or(|s| ids.len() < s.len()) {
                smallest = Some(ids);
            }
        }
        let ids = smallest.into_iter().flatten();
        Box::new(ids.filter_map(|id| self.by_id.get(id)).filter(move |r| {
            let labels = r.labels();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct R(HashMap<String, String>);

    impl Labelled for R {
        fn labels(&self) -> &HashMap<String, String> {
            &self.0
        }
    }

    fn r(pairs: &[(&str, &str)]) -> R {
        R(pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect())
    }

    fn sel(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        r(pairs).0
    }

    fn ids<'a>(recs: &'a Records<R>, selector: &HashMap<String, String>) -> Vec<&'a str> {
        recs.iter()
            .filter(|(_, v)| recs.matching(selector).any(|m| std::ptr::eq(m, *v)))
            .map(|(k, _)| k.as_str())
            .collect()
    }

    #[test]
    fn resolve_takes_exact_ids_and_unique_prefixes_only() {
        let mut m = Records::default();
        m.insert("abc123".to_string(), r(&[]));
        m.insert("abd456".to_string(), r(&[]));
        assert_eq!(m.resolve("abc123"), Some("abc123"));
        assert_eq!(m.resolve("abc"), Some("abc123"));
        assert_eq!(m.resolve("ab"), None, "ambiguous prefix");
        assert_eq!(m.resolve("zz"), None);
        assert_eq!(m.resolve(""), None);
    }

    #[test]
    fn label_lookups_see_inserts_and_removes_and_need_every_label() {
        let mut m = Records::default();
        m.insert("a".into(), r(&[("uid", "1"), ("name", "x")]));
        m.insert("b".into(), r(&[("uid", "1"), ("name", "y")]));
        m.insert("c".into(), r(&[("uid", "2"), ("name", "x")]));
        assert_eq!(ids(&m, &sel(&[("uid", "1")])), ["a", "b"]);
        assert_eq!(ids(&m, &sel(&[("uid", "1"), ("name", "x")])), ["a"]);
        assert_eq!(ids(&m, &sel(&[("uid", "3")])), Vec::<&str>::new());
        assert_eq!(ids(&m, &sel(&[])), ["a", "b", "c"]);
        assert_eq!(m.remove("a"), Some(r(&[("uid", "1"), ("name", "x")])));
        assert_eq!(m.remove("a"), None);
        assert_eq!(ids(&m, &sel(&[("uid", "1")])), ["b"]);
        m.insert("b".into(), r(&[("uid", "9")]));
        assert_eq!(ids(&m, &sel(&[("uid", "1")])), Vec::<&str>::new(), "replaced: old labels gone");
        assert_eq!(ids(&m, &sel(&[("uid", "9")])), ["b"]);
        m.remove("b");
        m.remove("c");
        assert!(m.by_label.is_empty(), "no empty index entries are kept");
    }
}
