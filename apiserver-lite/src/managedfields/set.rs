//! Sets of field paths (structured-merge-diff's `fieldpath.Set`) as a trie: at each level the
//! elements that are members, and the subsets under elements that have members below them. An
//! element can be both (a list item that was set, and fields inside it). The wire form is
//! `FieldsV1`: an object keyed by element spellings, `"."` marking the node itself a member.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::path::{BadElement, Path, PathElement};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    /// Never holds an empty set.
    children: BTreeMap<PathElement, FieldSet>,
}

/// FieldsV1 that does not read as a set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    #[error("FieldsV1 at {path:?} must be a JSON object")]
    NotObject { path: String },
    #[error("FieldsV1 at {path:?}: {source}")]
    Element { path: String, source: BadElement },
}

impl FieldSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Makes `pe` a member, with `below` the members under it.
    pub fn add(&mut self, pe: PathElement, below: FieldSet) {
        if below.is_empty() {
            self.members.insert(pe);
        } else {
            self.members.insert(pe.clone());
            self.children.entry(pe).or_default().merge(below);
        }
    }

    /// Adds `below`'s members under `path`.
    pub fn insert_below(&mut self, path: &[PathElement], below: FieldSet) {
        if below.is_empty() {
            return;
        }
        match path {
            [] => self.merge(below),
            [first, rest @ ..] => {
                self.children.entry(first.clone()).or_default().insert_below(rest, below)
            }
        }
    }

    /// Adds `other`'s members, taking them.
    fn merge(&mut self, other: FieldSet) {
        if self.is_empty() {
            *self = other;
        } else {
            self.extend(&other);
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The members below `pe`, relative to it.
    pub fn with_prefix(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    pub fn is_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// Adds `other`'s members (the union, in place: nothing of `self` is copied).
    pub fn extend(&mut self, other: &FieldSet) {
        self.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            match self.children.get_mut(pe) {
                Some(mine) => mine.extend(c),
                None => {
                    self.children.insert(pe.clone(), c.clone());
                }
            }
        }
    }

    /// Members of `self` that are not members of `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.remove(other);
        out
    }

    /// Removes `other`'s members (the difference, in place). The work follows `other`, which
    /// is the smaller set where it matters (the metadata stripped from every entry).
    pub fn remove(&mut self, other: &FieldSet) {
        self.remove_members(&other.members);
        for (pe, o) in &other.children {
            if let Some(mine) = self.children.get_mut(pe) {
                mine.remove(o);
                if mine.is_empty() {
                    self.children.remove(pe);
                }
            }
        }
    }

    fn remove_members(&mut self, gone: &BTreeSet<PathElement>) {
        if gone.len() < self.members.len() {
            for pe in gone {
                self.members.remove(pe);
            }
        } else {
            self.members.retain(|pe| !gone.contains(pe));
        }
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, c)| {
                let both = c.intersection(other.children.get(pe)?);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Members of `self` that are neither members of `other` nor below one of its members.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.remove_recursive(other);
        out
    }

    /// Removes what lies at or below `other`'s members (the recursive difference, in place).
    pub fn remove_recursive(&mut self, other: &FieldSet) {
        self.remove_members(&other.members);
        for pe in &other.members {
            self.children.remove(pe);
        }
        for (pe, o) in &other.children {
            if let Some(mine) = self.children.get_mut(pe) {
                mine.remove_recursive(o);
                if mine.is_empty() {
                    self.children.remove(pe);
                }
            }
        }
    }

    /// The set with every field that leads to a member made a member itself (upstream's
    /// `EnsureNamedFieldsAreMembers`), so that removing it removes a struct no one holds.
    pub fn with_named_fields(&self) -> FieldSet {
        let mut out = FieldSet { members: self.members.clone(), children: BTreeMap::new() };
        for (pe, c) in &self.children {
            if pe.field_name().is_some() {
                out.members.insert(pe.clone());
            }
            out.children.insert(pe.clone(), c.with_named_fields());
        }
        out
    }

    /// Every member path, members of a level before the levels below it (upstream's order).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(Path(p));
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The FieldsV1 form: one walk over the members and the subsets side by side, both in
    /// element order.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let order = match (members.peek(), children.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(pe), Some((child, _))) => (*pe).cmp(*child),
            };
            let (pe, below, member) = match order {
                Ordering::Less => match members.next() {
                    Some(pe) => (pe, None, true),
                    None => break,
                },
                Ordering::Greater => match children.next() {
                    Some((pe, c)) => (pe, Some(c), false),
                    None => break,
                },
                Ordering::Equal => match (members.next(), children.next()) {
                    (Some(pe), Some((_, c))) => (pe, Some(c), true),
                    _ => break,
                },
            };
            let node = match below {
                Some(c) => {
                    let mut node = c.to_fields_v1();
                    if member && let Some(o) = node.as_object_mut() {
                        o.insert(".".to_string(), Value::Object(Map::new()));
                    }
                    node
                }
                None => Value::Object(Map::new()),
            };
            m.insert(pe.as_str().to_string(), node);
        }
        Value::Object(m)
    }

    /// Reads FieldsV1.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsError> {
        Self::read(v, "")
    }

    fn read(v: &Value, at: &str) -> Result<FieldSet, FieldsError> {
        let obj = v.as_object().ok_or_else(|| FieldsError::NotObject { path: at.to_string() })?;
        let mut out = FieldSet::new();
        for (k, child) in obj {
            if k == "." {
                continue;
            }
            let here = format!("{at}/{k}");
            let pe = PathElement::parse(k)
                .map_err(|source| FieldsError::Element { path: here.clone(), source })?;
            let inner = child.as_object().ok_or(FieldsError::NotObject { path: here.clone() })?;
            let sub = Self::read(child, &here)?;
            if inner.is_empty() || inner.contains_key(".") {
                out.members.insert(pe.clone());
            }
            if !sub.is_empty() {
                out.children.insert(pe, sub);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(v: Value) -> FieldSet {
        FieldSet::from_fields_v1(&v).unwrap()
    }

    fn p(names: &[&str]) -> Vec<PathElement> {
        Path::fields(names).0
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_nodes_that_are_members_and_parents() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
            }}}}
        });
        let s = set(v.clone());
        assert!(s.has(&p(&["spec", "replicas"])));
        assert!(s.has(&p(&["metadata", "labels"])));
        assert!(!s.has(&p(&["spec"])), "a parent is no member without its dot");
        assert_eq!(s.to_fields_v1(), v);
        assert_eq!(s.paths().len(), 6);
    }

    #[test]
    fn bad_fields_v1_names_where() {
        assert_eq!(
            FieldSet::from_fields_v1(&json!([])),
            Err(FieldsError::NotObject { path: String::new() })
        );
        assert!(matches!(
            FieldSet::from_fields_v1(&json!({"f:spec": {"x:y": {}}})),
            Err(FieldsError::Element { path, .. }) if path == "/f:spec/x:y"
        ));
        assert_eq!(
            FieldSet::from_fields_v1(&json!({"f:spec": 1})),
            Err(FieldsError::NotObject { path: "/f:spec".into() })
        );
    }

    #[test]
    fn union_difference_and_intersection_work_per_member() {
        let a = set(json!({"f:spec": {"f:replicas": {}, "f:paused": {}}, "f:data": {"f:a": {}}}));
        let b = set(json!({"f:spec": {"f:replicas": {}, "f:minReadySeconds": {}}}));
        let mut union = a.clone();
        union.extend(&b);
        assert_eq!(union.paths().len(), 4);
        assert_eq!(
            a.difference(&b),
            set(json!({"f:spec": {"f:paused": {}}, "f:data": {"f:a": {}}}))
        );
        assert_eq!(a.intersection(&b), set(json!({"f:spec": {"f:replicas": {}}})));
        assert!(a.difference(&a).is_empty(), "emptied levels are dropped");
    }

    #[test]
    fn removing_in_place_follows_whichever_side_has_fewer_members() {
        let big = set(json!({"f:a": {}, "f:b": {}, "f:c": {}, "f:d": {"f:x": {}, "f:y": {}}}));
        let small = set(json!({"f:b": {}, "f:d": {"f:x": {}}, "f:z": {}}));
        let mut fewer_removed = big.clone();
        fewer_removed.remove(&small);
        assert_eq!(fewer_removed, set(json!({"f:a": {}, "f:c": {}, "f:d": {"f:y": {}}})));
        let mut more_removed = small.clone();
        more_removed.remove(&big);
        assert_eq!(more_removed, set(json!({"f:z": {}})));
        let mut under = big.clone();
        under.remove_recursive(&set(json!({"f:d": {}, "f:a": {}})));
        assert_eq!(under, set(json!({"f:b": {}, "f:c": {}})));
    }

    #[test]
    fn recursive_difference_drops_what_lies_under_a_member() {
        let a = set(json!({"f:status": {"f:replicas": {}}, "f:spec": {"f:replicas": {}}}));
        let status = set(json!({"f:status": {}}));
        assert_eq!(a.recursive_difference(&status), set(json!({"f:spec": {"f:replicas": {}}})));
        assert_eq!(a.difference(&status), a, "plain difference keeps the fields below");
    }

    #[test]
    fn named_fields_become_members_but_list_items_stay_as_they_are() {
        let s = set(json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {"f:image": {}}}}}));
        let e = s.with_named_fields();
        assert!(e.has(&p(&["spec"])) && e.has(&p(&["spec", "containers"])));
        let item = PathElement::key(&[("name", &json!("a"))]);
        let mut path = p(&["spec", "containers"]);
        path.push(item);
        assert!(!e.has(&path));
    }
}
