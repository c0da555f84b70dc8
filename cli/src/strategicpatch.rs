//! kubectl's three-way strategic merge patch (upstream's
//! `strategicpatch.CreateThreeWayMergePatch` with `overwrite`): from the last applied
//! configuration (`original`), the new one (`modified`) and the live object (`current`), the
//! patch that sets what `modified` changes against `current` and deletes what `original` had
//! and `modified` dropped. Lists with a merge key (from [`api::schema`], the table apiserver-lite
//! merges by) are diffed per item, with `$patch: delete` for removed items and
//! `$setElementOrder/<list>` for the order; sets of scalars with `$deleteFromPrimitiveList/`;
//! `retainKeys` fields with `$retainKeys`; other lists are replaced whole. [`two_way`] is
//! the two-way patch (`kubectl edit`'s). Pure.

use api::schema::{self, ListType};
use serde_json::{Map, Value};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// An item of a merge-keyed list without its key (upstream's wording).
    #[error("map: {item} does not contain declared merge key: {key}")]
    NoMergeKey { item: String, key: &'static str },
}

/// The patch taking `current` to `modified`, deleting what `original` had that `modified` has
/// not; empty when there is nothing to change.
pub fn three_way(
    original: &Map<String, Value>,
    modified: &Map<String, Value>,
    current: &Map<String, Value>,
) -> Result<Map<String, Value>, PatchError> {
    let delta = diff_maps(current, modified, Options { ignore_deletions: true, ..Options::NONE })?;
    let deletions =
        diff_maps(original, modified, Options { ignore_changes: true, ..Options::NONE })?;
    Ok(merge_map(deletions, delta))
}

/// The patch taking `original` to `modified` (upstream's `CreateTwoWayMergePatch`, as
/// `kubectl edit` sends it): changes and deletions alike; empty when they agree.
pub fn two_way(
    original: &Map<String, Value>,
    modified: &Map<String, Value>,
) -> Result<Map<String, Value>, PatchError> {
    diff_maps(original, modified, Options::NONE)
}

#[derive(Debug, Clone, Copy)]
struct Options {
    ignore_deletions: bool,
    ignore_changes: bool,
    retain_keys: bool,
}

impl Options {
    const NONE: Options =
        Options { ignore_deletions: false, ignore_changes: false, retain_keys: false };
}

/// How a list field merges in a strategic merge patch.
enum ListStrategy {
    /// Items identified by this key.
    Keyed(&'static str),
    /// Scalars merged as a set.
    Scalars,
    /// Replaced whole.
    Replace,
}

fn list_strategy(field: &str, sample: Option<&Value>) -> ListStrategy {
    match schema::list_type(field, sample) {
        ListType::Map(keys) if sample.is_none_or(Value::is_object) => match keys.first() {
            Some(k) => ListStrategy::Keyed(k),
            None => ListStrategy::Replace,
        },
        ListType::Set => ListStrategy::Scalars,
        _ => ListStrategy::Replace,
    }
}

/// Whether two values are of one JSON type (as Go's decoded types compare).
fn same_type(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.is_f64() == y.is_f64(),
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

fn diff_maps(
    original: &Map<String, Value>,
    modified: &Map<String, Value>,
    o: Options,
) -> Result<Map<String, Value>, PatchError> {
    let mut patch = Map::new();
    let mut retain = Vec::new();
    for (key, m) in modified {
        if o.retain_keys && !m.is_null() {
            retain.push(Value::String(key.clone()));
        }
        let Some(orig) = original.get(key) else {
            if !o.ignore_changes {
                patch.insert(key.clone(), m.clone());
            }
            continue;
        };
        if key == DIRECTIVE {
            if orig != m {
                patch.insert(key.clone(), m.clone());
            }
            continue;
        }
        if !same_type(orig, m) {
            if !o.ignore_changes {
                patch.insert(key.clone(), m.clone());
            }
            continue;
        }
        match (orig, m) {
            (Value::Object(a), Value::Object(b)) => {
                let sub = diff_maps(a, b, Options { retain_keys: schema::retains_keys(key), ..o })?;
                if !sub.is_empty() {
                    patch.insert(key.clone(), Value::Object(sub));
                }
            }
            (Value::Array(a), Value::Array(b)) => slice_diff(key, a, b, &mut patch, o)?,
            _ => {
                if !o.ignore_changes && orig != m {
                    patch.insert(key.clone(), m.clone());
                }
            }
        }
    }
    if !o.ignore_deletions {
        for key in original.keys() {
            if !modified.contains_key(key) {
                patch.insert(key.clone(), Value::Null);
            }
        }
    }
    let dropped = original.iter().any(|(k, v)| !v.is_null() && !modified.contains_key(k));
    if !retain.is_empty() && (!patch.is_empty() || dropped) {
        retain.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        patch.insert(RETAIN_KEYS.into(), Value::Array(retain));
    }
    Ok(patch)
}

fn slice_diff(
    key: &str,
    original: &[Value],
    modified: &[Value],
    patch: &mut Map<String, Value>,
    o: Options,
) -> Result<(), PatchError> {
    let strategy = list_strategy(key, modified.first().or(original.first()));
    if matches!(strategy, ListStrategy::Replace) {
        if !o.ignore_changes && original != modified {
            patch.insert(key.into(), Value::Array(modified.to_vec()));
        }
        return Ok(());
    }
    if original.is_empty() {
        if !modified.is_empty() && !o.ignore_changes {
            patch.insert(key.into(), Value::Array(modified.to_vec()));
        }
        return Ok(());
    }
    let o = Options { retain_keys: schema::retains_keys(key), ..o };
    let (items, deleted, order) = match strategy {
        ListStrategy::Keyed(k) => {
            let (mut items, deleted) = diff_keyed(original, modified, k, o)?;
            sort_by_order(&mut items, modified, Some(k));
            let same_order = original.len() == modified.len()
                && original.iter().zip(modified).all(|(a, b)| a.get(k) == b.get(k));
            items.extend(deleted);
            let order = ((!o.ignore_changes && (!items.is_empty() || !same_order))
                || (!o.ignore_deletions && !items.is_empty()))
            .then(|| {
                modified
                    .iter()
                    .map(|v| {
                        let mut m = Map::new();
                        m.insert(k.into(), v.get(k).cloned().unwrap_or(Value::Null));
                        Value::Object(m)
                    })
                    .collect::<Vec<_>>()
            });
            (items, Vec::new(), order)
        }
        ListStrategy::Scalars | ListStrategy::Replace => {
            let (mut added, deleted) = diff_scalars(original, modified, o);
            sort_by_order(&mut added, modified, None);
            let order = ((!o.ignore_deletions && !deleted.is_empty())
                || (!o.ignore_changes && original != modified))
                .then(|| modified.to_vec());
            (added, deleted, order)
        }
    };
    if !items.is_empty() {
        patch.insert(key.into(), Value::Array(items));
    }
    if !deleted.is_empty() {
        patch.insert(format!("{DELETE_FROM_PRIMITIVE}{key}"), Value::Array(deleted));
    }
    if let Some(order) = order.filter(|o| !o.is_empty()) {
        patch.insert(format!("{SET_ORDER}{key}"), Value::Array(order));
    }
    Ok(())
}

/// A merge key's value as upstream compares them (`fmt.Sprintf("%v")`).
fn key_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn key_of(item: &Value, key: &'static str) -> Result<String, PatchError> {
    item.get(key)
        .map(key_text)
        .ok_or_else(|| PatchError::NoMergeKey { item: item.to_string(), key })
}

/// Changed and added items (each with its merge key), and `$patch: delete` for removed ones.
fn diff_keyed(
    original: &[Value],
    modified: &[Value],
    key: &'static str,
    o: Options,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut items = Vec::new();
    let mut deleted = Vec::new();
    let mut orig: Vec<(String, &Value)> =
        original.iter().map(|v| key_of(v, key).map(|k| (k, v))).collect::<Result<_, _>>()?;
    let mut modi: Vec<(String, &Value)> =
        modified.iter().map(|v| key_of(v, key).map(|k| (k, v))).collect::<Result<_, _>>()?;
    orig.sort_by(|a, b| a.0.cmp(&b.0));
    modi.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut i, mut j) = (0, 0);
    while i < orig.len() || j < modi.len() {
        let step = match (orig.get(i), modi.get(j)) {
            (Some(a), Some(b)) => a.0.cmp(&b.0),
            (None, _) => std::cmp::Ordering::Greater,
            (_, None) => std::cmp::Ordering::Less,
        };
        match step {
            std::cmp::Ordering::Equal => {
                let (a, b) = (orig[i].1, modi[j].1);
                if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
                    let mut sub = diff_maps(a, b, o)?;
                    if !sub.is_empty() {
                        sub.insert(key.into(), b.get(key).cloned().unwrap_or(Value::Null));
                        items.push(Value::Object(sub));
                    }
                }
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Greater => {
                if !o.ignore_changes {
                    items.push(modi[j].1.clone());
                }
                j += 1;
            }
            std::cmp::Ordering::Less => {
                if !o.ignore_deletions {
                    let mut d = Map::new();
                    d.insert(DIRECTIVE.into(), Value::from("delete"));
                    d.insert(key.into(), orig[i].1.get(key).cloned().unwrap_or(Value::Null));
                    deleted.push(Value::Object(d));
                }
                i += 1;
            }
        }
    }
    Ok((items, deleted))
}

/// Scalars added and removed (each once).
fn diff_scalars(original: &[Value], modified: &[Value], o: Options) -> (Vec<Value>, Vec<Value>) {
    let mut added = Vec::new();
    let mut deleted: Vec<Value> = Vec::new();
    if !o.ignore_changes {
        for v in modified {
            if !original.contains(v) && !added.contains(v) {
                added.push(v.clone());
            }
        }
    }
    if !o.ignore_deletions {
        for v in original {
            if !modified.contains(v) && !deleted.contains(v) {
                deleted.push(v.clone());
            }
        }
        deleted.sort_by_key(key_text);
    }
    (added, deleted)
}

/// Sorts `items` stably by where their key (or value) stands in `order`; unknown ones last.
fn sort_by_order(items: &mut [Value], order: &[Value], key: Option<&str>) {
    let id = |v: &Value| match key {
        Some(k) => v.get(k).cloned(),
        None => Some(v.clone()),
    };
    let rank = |v: &Value| {
        let mine = id(v);
        order.iter().position(|o| id(o) == mine).unwrap_or(usize::MAX)
    };
    items.sort_by_key(rank);
}

/// Merges the additions-and-changes patch into the deletions patch, as upstream's `mergeMap`
/// with parallel lists kept and nulls preserved.
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
) -> Map<String, Value> {
    if let Some(retain) = patch.remove(RETAIN_KEYS) {
        original.entry(RETAIN_KEYS).or_insert(retain);
    }
    let orders: Vec<String> = patch.keys().filter(|k| k.starts_with(SET_ORDER)).cloned().collect();
    for order_key in orders {
        let Some(order) = patch.remove(&order_key) else { continue };
        original.entry(order_key.clone()).or_insert_with(|| order.clone());
        let field = &order_key[SET_ORDER.len()..];
        let merged = match (original.remove(field), patch.remove(field)) {
            (Some(Value::Array(a)), Some(Value::Array(b))) => merge_slice(field, a, &b),
            (Some(a), None) => {
                original.insert(field.into(), a);
                continue;
            }
            (None, Some(Value::Array(b))) => b,
            (_, Some(b)) => {
                original.insert(field.into(), b);
                continue;
            }
            (None, None) => continue,
        };
        let order = order.as_array().map(Vec::as_slice).unwrap_or_default();
        original.insert(field.into(), Value::Array(ordered(field, merged, order)));
    }
    for (k, v) in patch {
        if k.starts_with(DELETE_FROM_PRIMITIVE) || v.is_null() {
            original.insert(k, v);
            continue;
        }
        let merged = match (original.remove(&k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => Value::Object(merge_map(a, b)),
            (Some(Value::Array(a)), Value::Array(b)) => match list_strategy(&k, b.first()) {
                ListStrategy::Replace => Value::Array(b),
                _ => Value::Array(merge_slice(&k, a, &b)),
            },
            (_, v) => v,
        };
        original.insert(k, merged);
    }
    original
}

/// A merge-strategy list of a patch merged into another's: items of `patch` merged into or
/// appended to `original`'s, the patch's items first in its order, `$patch` directives last.
fn merge_slice(field: &str, original: Vec<Value>, patch: &[Value]) -> Vec<Value> {
    let key = match list_strategy(field, patch.first().or(original.first())) {
        ListStrategy::Keyed(k) => Some(k),
        _ => None,
    };
    let mut out = original;
    for item in patch {
        let at = match key {
            Some(k) => out.iter().position(|e| e.get(k).is_some() && e.get(k) == item.get(k)),
            None => out.iter().position(|e| e == item),
        };
        match (at, key) {
            (Some(i), Some(_)) => {
                if let (Value::Object(a), Value::Object(b)) = (out[i].clone(), item) {
                    out[i] = Value::Object(merge_map(a, b.clone()));
                }
            }
            (Some(_), None) => {}
            (None, _) => out.push(item.clone()),
        }
    }
    ordered(field, out, patch)
}

/// `items` with those named in `order` first, in its order, then the rest, directives last.
fn ordered(field: &str, items: Vec<Value>, order: &[Value]) -> Vec<Value> {
    let key = match list_strategy(field, order.first().or(items.first())) {
        ListStrategy::Keyed(k) => Some(k),
        _ => None,
    };
    let named = |v: &Value| match key {
        Some(k) => order.iter().any(|o| o.get(k).is_some() && o.get(k) == v.get(k)),
        None => order.contains(v),
    };
    let directive = |v: &Value| v.get(DIRECTIVE).is_some();
    let (mut first, rest): (Vec<Value>, Vec<Value>) =
        items.into_iter().partition(|v| named(v) && !directive(v));
    sort_by_order(&mut first, order, key);
    let (plain, directives): (Vec<Value>, Vec<Value>) =
        rest.into_iter().partition(|v| !directive(v));
    first.extend(plain);
    first.extend(directives);
    first
}

#[cfg(test)]
mod tests;
