//! `get --sort-by` as kubectl's `SortingPrinter`, pure: the field (a relaxed JSONPath, `.a.b`
//! or `{.a.b}`) read from each object with missing keys allowed, its first value compared as
//! kubectl's `isLess` compares unstructured values (integers and floats by value, strings as
//! quantities when both parse, else bytewise; an object without the field first). An order of
//! the objects, or kubectl's error when no object has the field.
//!
//! Go's `sort.Sort` is an insertion sort up to 12 elements, which this follows exactly; beyond,
//! a stable sort stands in for Go's unstable pdqsort, so equal keys may come out in another
//! order than kubectl's.
//!
//! What kubectl v1.35 does around the sorter, as observed: listed objects (`-o json|yaml|name|
//! jsonpath|custom-columns`) need a relaxed path and fail on any error; a table is sorted only
//! when it is the only one (several tables — types or names — fail with the not-found error),
//! and a failure while sorting it prints nothing for it (the printer's error is dropped).

use std::cmp::Ordering;

use api::quantity::Quantity;
use serde_json::Value;

use crate::printers::custom_columns::relaxed;
use crate::printers::jsonpath::Template;
use crate::printers::jsonpath::eval::V;

/// Go's `maxInsertion` in `sort.Sort`: up to this many elements, an insertion sort.
const MAX_INSERTION: usize = 12;

/// Why objects cannot be sorted by a field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SortError {
    /// The field does not parse as a JSONPath template.
    #[error("{0}")]
    Parse(String),
    /// No object has the field.
    #[error("couldn't find any field with path {0:?} in the list of objects")]
    NotFound(String),
    /// Two values kubectl cannot compare (booleans, maps, lists, mixed kinds).
    #[error("Field {field} is an unsortable type: {reason}")]
    Unsortable { field: String, reason: String },
}

/// The field a table is sorted by: the relaxed path, or the argument as it is.
pub fn table_field(sort_by: &str) -> String {
    relaxed(sort_by).unwrap_or_else(|_| sort_by.to_string())
}

/// The field listed objects are sorted by: the relaxed path, or its error.
pub fn object_field(sort_by: &str) -> Result<String, SortError> {
    relaxed(sort_by).map_err(|e| SortError::Parse(e.to_string()))
}

/// The order of `objects` sorted by `field` (a JSONPath template): indexes into `objects`.
pub fn order(objects: &[&Value], field: &str) -> Result<Vec<usize>, SortError> {
    let field = field.to_string();
    let template = Template::parse(&field).map_err(|e| SortError::Parse(e.to_string()))?;
    let mut keys: Vec<Option<Value>> = Vec::with_capacity(objects.len());
    for o in objects {
        let groups = template.find(o, true).map_err(SortError::Parse)?;
        let first = groups.first().and_then(|g| g.first()).map(owned);
        keys.push(first);
    }
    if !objects.is_empty() && keys.iter().all(Option::is_none) {
        return Err(SortError::NotFound(field));
    }
    let mut idx: Vec<usize> = (0..objects.len()).collect();
    let mut failure = None;
    let mut less = |a: usize, b: usize| -> bool {
        match (&keys[a], &keys[b]) {
            (None, _) => true,
            (_, None) => false,
            (Some(x), Some(y)) => is_less(x, y).unwrap_or_else(|reason| {
                failure.get_or_insert(reason);
                false
            }),
        }
    };
    if idx.len() <= MAX_INSERTION {
        for i in 1..idx.len() {
            let mut j = i;
            while j > 0 && less(idx[j], idx[j - 1]) {
                idx.swap(j, j - 1);
                j -= 1;
            }
        }
    } else {
        // A total order for Rust's sort: missing keys first, then `isLess` both ways.
        idx.sort_by(|&a, &b| match (&keys[a], &keys[b]) {
            (None, None) => Ordering::Equal,
            (None, _) => Ordering::Less,
            (_, None) => Ordering::Greater,
            (Some(x), Some(y)) => match (is_less(x, y), is_less(y, x)) {
                (Ok(true), _) => Ordering::Less,
                (_, Ok(true)) => Ordering::Greater,
                (Err(reason), _) => {
                    failure.get_or_insert(reason);
                    Ordering::Equal
                }
                _ => Ordering::Equal,
            },
        });
    }
    match failure {
        Some(reason) => Err(SortError::Unsortable { field, reason }),
        None => Ok(idx),
    }
}

fn owned(v: &V<'_>) -> Value {
    match v {
        V::J(j) => (*j).clone(),
        V::Str(s) => Value::String(s.clone()),
        V::Int(i) => Value::from(*i),
        V::Float(f) => Value::from(*f),
        V::Bool(b) => Value::Bool(*b),
        V::Byte(b) => Value::from(*b),
    }
}

/// kubectl's `isLess` over unstructured values (Go's `interface{}` case).
fn is_less(a: &Value, b: &Value) -> Result<bool, String> {
    match (a, b) {
        (Value::Null, Value::Null) => Ok(false),
        (Value::Null, _) => Ok(true),
        (_, Value::Null) => Ok(false),
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => Ok(x < y),
            // Unstructured JSON holds int64 or float64; the two never compare.
            (Some(_), None) | (None, Some(_)) => Err("unsortable interface: interface".into()),
            (None, None) => Ok(x.as_f64().unwrap_or(0.0) < y.as_f64().unwrap_or(0.0)),
        },
        (Value::String(x), Value::String(y)) => match (Quantity::parse(x), Quantity::parse(y)) {
            (Ok(qx), Ok(qy)) => Ok(qx.cmp_value(qy) == Ordering::Less),
            _ => Ok(x < y),
        },
        (Value::Bool(_), _) => Err("unsortable type: bool".into()),
        (Value::Array(_), _) => Err("unsortable type: []interface {}".into()),
        (Value::Object(_), _) => Err("unsortable type: map[string]interface {}".into()),
        _ => Err("unsortable interface: interface".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sorted(objects: &[Value], by: &str) -> Result<Vec<usize>, SortError> {
        order(&objects.iter().collect::<Vec<_>>(), &object_field(by)?)
    }

    fn named(name: &str, extra: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": extra})
    }

    #[test]
    fn strings_sort_bytewise_and_paths_may_be_relaxed() {
        let objs = [named("b", json!({})), named("a", json!({})), named("C", json!({}))];
        for by in [".metadata.name", "metadata.name", "{.metadata.name}"] {
            assert_eq!(sorted(&objs, by).unwrap(), [2, 1, 0]);
        }
    }

    #[test]
    fn a_path_that_does_not_relax_fails_for_objects_and_is_kept_for_tables() {
        assert!(object_field("{.a").unwrap_err().to_string().starts_with("unexpected path string"));
        assert_eq!(table_field("{.a"), "{.a");
        assert_eq!(table_field("a.b"), "{.a.b}");
    }

    #[test]
    fn numbers_sort_by_value_and_quantities_by_amount() {
        let objs = [
            named("a", json!({"n": 10, "q": "1Gi"})),
            named("b", json!({"n": 9, "q": "512Mi"})),
            named("c", json!({"n": 100, "q": "2"})),
        ];
        assert_eq!(sorted(&objs, ".spec.n").unwrap(), [1, 0, 2]);
        assert_eq!(sorted(&objs, ".spec.q").unwrap(), [2, 1, 0]);
    }

    #[test]
    fn objects_without_the_field_come_first_in_their_order() {
        let objs = [
            named("a", json!({"n": 2})),
            named("b", json!({})),
            named("c", json!({"n": 1})),
            named("d", json!({})),
        ];
        assert_eq!(sorted(&objs, ".spec.n").unwrap(), [3, 1, 2, 0]);
    }

    #[test]
    fn equal_keys_keep_their_order() {
        let objs =
            [named("a", json!({"n": 1})), named("b", json!({"n": 0})), named("c", json!({"n": 1}))];
        assert_eq!(sorted(&objs, ".spec.n").unwrap(), [1, 0, 2]);
    }

    #[test]
    fn a_field_no_object_has_is_kubectls_error() {
        let objs = [named("a", json!({}))];
        assert_eq!(
            sorted(&objs, ".spec.nope").unwrap_err().to_string(),
            "couldn't find any field with path \"{.spec.nope}\" in the list of objects"
        );
        assert!(sorted(&[], ".spec.nope").unwrap().is_empty());
    }

    #[test]
    fn booleans_and_maps_cannot_be_sorted() {
        let objs = [named("a", json!({"b": true})), named("b", json!({"b": false}))];
        assert!(matches!(sorted(&objs, ".spec.b"), Err(SortError::Unsortable { .. })));
        assert!(matches!(sorted(&objs, ".spec"), Err(SortError::Unsortable { .. })));
    }

    #[test]
    fn more_than_twelve_objects_sort_stably() {
        let objs: Vec<Value> =
            (0..20).map(|i| named(&format!("{i:02}"), json!({"n": 20 - i}))).collect();
        let order = sorted(&objs, ".spec.n").unwrap();
        assert_eq!(order, (0..20).rev().collect::<Vec<_>>());
    }
}
