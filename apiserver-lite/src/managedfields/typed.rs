//! Objects read through the [`schema`](super::schema), as structured-merge-diff's `typed`
//! package reads them: the field set an object sets, the comparison of two objects (added,
//! modified, removed), the merge of an applied configuration into a live object, and the
//! removal of fields no manager holds any more. Pure functions over JSON.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

use super::path::{Path, PathElement};
use super::schema::{self, ListType, ObjectType};
use super::set::FieldSet;

/// An object that does not fit the schema, at a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TypeError {
    pub path: Path,
    pub message: String,
}

/// How a node is read: by its field name (`None` for the root and list items) and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Object(ObjectType),
    List(ListType),
    Scalar,
}

fn node(field: Option<&str>, v: &Value) -> Node {
    match v {
        Value::Object(_) => {
            Node::Object(field.map(schema::object_type).unwrap_or(ObjectType::Struct))
        }
        Value::Array(items) => Node::List(
            field.map(|f| schema::list_type(f, items.first())).unwrap_or(ListType::Atomic),
        ),
        _ => Node::Scalar,
    }
}

/// The path element of a list item.
pub fn item_element(lt: ListType, i: usize, item: &Value) -> Result<PathElement, String> {
    match lt {
        ListType::Atomic => Ok(PathElement::index(i)),
        ListType::Set => Ok(PathElement::value(item)),
        ListType::Map(keys) => {
            let obj = item.as_object().ok_or_else(|| format!("element {i}: expected map"))?;
            let mut fields = Vec::with_capacity(keys.len());
            let defaults: Vec<Option<Value>> =
                keys.iter().map(|k| schema::key_default(k)).collect();
            for (k, default) in keys.iter().zip(&defaults) {
                match (obj.get(*k).filter(|v| !v.is_null()), default) {
                    (Some(v), _) => fields.push((*k, v)),
                    (None, Some(d)) => fields.push((*k, d)),
                    (None, None) => {
                        return Err(format!(
                            "element {i}: associative list with keys has an element that omits key field {k:?} (and doesn't have default value)"
                        ));
                    }
                }
            }
            Ok(PathElement::key(&fields))
        }
    }
}

/// A list's items by path element, the first of repeated ones kept (as upstream reads live
/// objects); items whose element cannot be made are left out.
fn index(lt: ListType, items: &[Value]) -> Vec<(PathElement, &Value)> {
    let mut seen = HashSet::new();
    items
        .iter()
        .enumerate()
        .filter_map(|(i, v)| item_element(lt, i, v).ok().map(|pe| (pe, v)))
        .filter(|(pe, _)| seen.insert(pe.clone()))
        .collect()
}

/// Refuses what upstream refuses in an applied configuration: list map items without their
/// keys, and two items with the same key.
pub fn check(v: &Value) -> Result<(), TypeError> {
    check_node(None, v, &mut Vec::new())
}

fn check_node(
    field: Option<&str>,
    v: &Value,
    path: &mut Vec<PathElement>,
) -> Result<(), TypeError> {
    match (node(field, v), v) {
        (Node::Object(ObjectType::Atomic), _) | (Node::Scalar, _) => Ok(()),
        (Node::Object(_), Value::Object(m)) => {
            for (k, child) in m {
                path.push(PathElement::field(k));
                check_node(Some(k), child, path)?;
                path.pop();
            }
            Ok(())
        }
        (Node::List(lt @ (ListType::Map(_) | ListType::Set)), Value::Array(items)) => {
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = item_element(lt, i, item)
                    .map_err(|message| TypeError { path: Path(path.clone()), message })?;
                if !seen.insert(pe.clone()) {
                    let message = format!("duplicate entries for key {pe}");
                    return Err(TypeError { path: Path(path.clone()), message });
                }
                path.push(pe);
                check_node(None, item, path)?;
                path.pop();
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The fields `v` sets (upstream's `ToFieldSet`): leaves, map entries, empty objects and list
/// items; struct fields only through what they hold.
pub fn to_set(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    set_node(None, v, &mut Vec::new(), &mut out);
    out
}

fn set_node(field: Option<&str>, v: &Value, path: &mut Vec<PathElement>, out: &mut FieldSet) {
    match (node(field, v), v) {
        (Node::Object(ot), Value::Object(m)) if ot != ObjectType::Atomic => {
            for (k, child) in m {
                path.push(PathElement::field(k));
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || ot == ObjectType::Map {
                    out.insert(path);
                }
                set_node(Some(k), child, path, out);
                path.pop();
            }
        }
        (Node::List(lt), Value::Array(items)) if lt != ListType::Atomic => {
            for (pe, item) in index(lt, items) {
                path.push(pe);
                out.insert(path);
                set_node(None, item, path, out);
                path.pop();
            }
        }
        _ => out.insert(path),
    }
}

/// What changed from `lhs` to `rhs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Without what lies at or below the members of `ignored`.
    pub fn without(mut self, ignored: &FieldSet) -> Comparison {
        for set in [&mut self.added, &mut self.modified, &mut self.removed] {
            set.remove_recursive(ignored);
        }
        self
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "added {:?}, modified {:?}, removed {:?}",
            self.added.paths().iter().map(ToString::to_string).collect::<Vec<_>>(),
            self.modified.paths().iter().map(ToString::to_string).collect::<Vec<_>>(),
            self.removed.paths().iter().map(ToString::to_string).collect::<Vec<_>>()
        )
    }
}

/// Compares two objects (upstream's `Compare`): leaves added, removed or changed, and the
/// objects and lists that appear or disappear as a whole.
pub fn compare(lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    compare_node(None, Some(lhs), Some(rhs), &mut Vec::new(), &mut c);
    c
}

fn compare_node(
    field: Option<&str>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) {
    if let (None, Some(added)) = (lhs, rhs) {
        // Everything from here down is added: built level by level, not path by path.
        c.added.insert(path);
        c.added.insert_below(path, added_below(field, added));
        return;
    }
    let shape =
        rhs.filter(|v| !v.is_null()).or(lhs).map(|v| node(field, v)).unwrap_or(Node::Scalar);
    let fits =
        |v: Option<&Value>, want: fn(&Value) -> bool| v.is_none_or(|v| v.is_null() || want(v));
    let descended = match shape {
        Node::Object(ot)
            if ot != ObjectType::Atomic
                && fits(lhs, Value::is_object)
                && fits(rhs, Value::is_object) =>
        {
            let empty = Map::new();
            let l = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let r = rhs.and_then(Value::as_object).unwrap_or(&empty);
            if l.is_empty() && r.is_empty() {
                false
            } else {
                for (k, lv) in l {
                    path.push(PathElement::field(k));
                    compare_node(Some(k), Some(lv), r.get(k), path, c);
                    path.pop();
                }
                for (k, rv) in r.iter().filter(|(k, _)| !l.contains_key(*k)) {
                    path.push(PathElement::field(k));
                    compare_node(Some(k), None, Some(rv), path, c);
                    path.pop();
                }
                true
            }
        }
        Node::List(lt)
            if lt != ListType::Atomic
                && fits(lhs, Value::is_array)
                && fits(rhs, Value::is_array) =>
        {
            let l = lhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let r = rhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            if l.is_empty() && r.is_empty() {
                false
            } else {
                let (li, ri) = (index(lt, l), index(lt, r));
                for (pe, lv) in &li {
                    let rv = ri.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                    path.push(pe.clone());
                    compare_node(None, Some(lv), rv, path, c);
                    path.pop();
                }
                for (pe, rv) in ri.iter().filter(|(p, _)| !li.iter().any(|(q, _)| q == p)) {
                    path.push(pe.clone());
                    compare_node(None, None, Some(rv), path, c);
                    path.pop();
                }
                true
            }
        }
        _ => false,
    };
    match (lhs, rhs) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(l), Some(r)) if !descended && l != r => c.modified.insert(path),
        _ => {}
    }
}

/// The nodes below `v`, relative to it: what [`compare_node`] records for a value that is not
/// on the left, each node it descends to a member.
fn added_below(field: Option<&str>, v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    match (node(field, v), v) {
        (Node::Object(ot), Value::Object(m)) if ot != ObjectType::Atomic => {
            for (k, child) in m {
                out.add(PathElement::field(k), added_below(Some(k), child));
            }
        }
        (Node::List(lt), Value::Array(items)) if lt != ListType::Atomic => {
            for (pe, item) in index(lt, items) {
                out.add(pe, added_below(None, item));
            }
        }
        _ => {}
    }
    out
}

/// Merges an applied configuration into a live object (upstream's `Merge`): the
/// configuration's values win; structs, maps and associative lists merge item by item.
pub fn merge(live: &Value, config: &Value) -> Value {
    merge_node(None, live, config)
}

fn merge_node(field: Option<&str>, lhs: &Value, rhs: &Value) -> Value {
    match (node(field, rhs), lhs, rhs) {
        (Node::Object(ot), Value::Object(l), Value::Object(r)) if ot != ObjectType::Atomic => {
            let mut out = l.clone();
            for (k, rv) in r {
                let merged = match l.get(k) {
                    Some(lv) => merge_node(Some(k), lv, rv),
                    None => rv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Node::List(lt), Value::Array(l), Value::Array(r)) if lt != ListType::Atomic => {
            Value::Array(merge_list(lt, l, r))
        }
        _ => rhs.clone(),
    }
}

/// Upstream's item order: live items the configuration does not name stay where they were,
/// the configuration's items come in its order.
fn merge_list(lt: ListType, l: &[Value], r: &[Value]) -> Vec<Value> {
    let (li, ri) = (index(lt, l), index(lt, r));
    let in_l = |pe: &PathElement| li.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
    let in_r = |pe: &PathElement| ri.iter().any(|(p, _)| p == pe);
    let shared: Vec<&PathElement> =
        ri.iter().map(|(p, _)| p).filter(|p| in_l(p).is_some()).collect();
    let mut next_shared = shared.iter();
    let mut next = next_shared.next().copied();
    let mut out = Vec::with_capacity(li.len().max(ri.len()));
    let mut done: HashSet<&PathElement> = HashSet::new();
    let (mut i, mut j) = (0, 0);
    while i < li.len() || j < ri.len() {
        if i < li.len() && done.contains(&li[i].0) {
            i += 1;
            continue;
        }
        if i < li.len() && j < ri.len() {
            let pe = &li[i].0;
            if *pe == ri[j].0 {
                out.push(merge_node(None, li[i].1, ri[j].1));
                done.insert(pe);
                i += 1;
                j += 1;
                next = next_shared.next().copied();
                continue;
            }
            if in_r(pe) && next.is_some_and(|n| n != pe) {
                i += 1;
                continue;
            }
        }
        if i < li.len() && !in_r(&li[i].0) {
            out.push(li[i].1.clone());
            i += 1;
            continue;
        }
        if j < ri.len() {
            let pe = &ri[j].0;
            out.push(match in_l(pe) {
                Some(lv) => merge_node(None, lv, ri[j].1),
                None => ri[j].1.clone(),
            });
            done.insert(pe);
            if next == Some(pe) {
                next = next_shared.next().copied();
            }
            j += 1;
            continue;
        }
        i += 1;
    }
    out
}

/// Removes from `v` every field that `last` holds (with its named fields as members) and
/// `owned` does not, the topmost one taking what lies below it; objects and lists emptied by a
/// removal go too.
pub fn prune(v: &mut Value, last: &FieldSet, owned: &FieldSet) {
    prune_node(None, v, &last.with_named_fields(), Some(&owned.with_named_fields()));
}

fn prune_node(field: Option<&str>, v: &mut Value, last: &FieldSet, owned: Option<&FieldSet>) {
    let keep = |pe: &PathElement| !last.is_member(pe) || owned.is_some_and(|o| o.is_member(pe));
    match (node(field, v), v) {
        (Node::Object(ot), Value::Object(m)) if ot != ObjectType::Atomic => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let pe = PathElement::field(&k);
                if !keep(&pe) {
                    m.remove(&k);
                } else if let (Some(sub), Some(child)) = (last.with_prefix(&pe), m.get_mut(&k)) {
                    prune_node(Some(&k), child, sub, owned.and_then(|o| o.with_prefix(&pe)));
                    if is_empty_container(child) {
                        m.remove(&k);
                    }
                }
            }
        }
        (Node::List(lt), Value::Array(items)) if lt != ListType::Atomic => {
            let elements: Vec<Option<PathElement>> =
                items.iter().enumerate().map(|(i, it)| item_element(lt, i, it).ok()).collect();
            let mut kept = Vec::with_capacity(items.len());
            for (item, pe) in std::mem::take(items).into_iter().zip(elements) {
                let Some(pe) = pe else {
                    kept.push(item);
                    continue;
                };
                if !keep(&pe) {
                    continue;
                }
                let mut item = item;
                if let Some(sub) = last.with_prefix(&pe) {
                    prune_node(None, &mut item, sub, owned.and_then(|o| o.with_prefix(&pe)));
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
}

fn is_empty_container(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty) || v.as_array().is_some_and(Vec::is_empty)
}

#[cfg(test)]
mod tests;
