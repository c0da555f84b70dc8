//! Metadata and the small shared types: object metadata with owner references, label
//! selectors, times, quantities and int-or-strings.

use std::collections::BTreeMap;

use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::errors::ApiError;

use super::{R, done, list, nested, number, obj, plain, ptr, string_map, strings};

/// `metav1.ObjectMeta`. A create needs only what a client sets; the server-owned fields are
/// read too so that an object sent back as it was read still converts.
pub(super) fn object_meta(m: Option<meta::ObjectMeta>) -> R {
    let mut m = m.unwrap_or_default();
    let v = obj([
        ("name", plain(m.name.take())),
        ("generateName", plain(m.generate_name.take())),
        ("namespace", plain(m.namespace.take())),
        ("selfLink", plain(m.self_link.take())),
        ("uid", plain(m.uid.take())),
        ("resourceVersion", plain(m.resource_version.take())),
        ("generation", number(m.generation.take())),
        ("creationTimestamp", time(m.creation_timestamp.take())),
        ("deletionTimestamp", time(m.deletion_timestamp.take())),
        ("deletionGracePeriodSeconds", ptr(m.deletion_grace_period_seconds.take())),
        ("labels", string_map(std::mem::take(&mut m.labels))),
        ("annotations", string_map(std::mem::take(&mut m.annotations))),
        ("ownerReferences", list(std::mem::take(&mut m.owner_references), owner_reference)?),
        ("finalizers", strings(std::mem::take(&mut m.finalizers))),
        ("managedFields", list(std::mem::take(&mut m.managed_fields), managed_fields_entry)?),
    ]);
    done(&m, "ObjectMeta")?;
    Ok(v)
}

/// One `managedFields` entry, as a client sends back what it read (a typed client's
/// read-modify-write, `kubectl auth reconcile`); its FieldsV1 is the raw JSON it carries.
fn managed_fields_entry(mut e: meta::ManagedFieldsEntry) -> R {
    let fields = match e.fields_v1.take().and_then(|f| f.raw) {
        None => Value::Null,
        Some(raw) => serde_json::from_slice(&raw).map_err(|err| {
            ApiError::bad_request(format!(
                "metadata.managedFields: fieldsV1 of manager {:?} is not JSON: {err}",
                e.manager.as_deref().unwrap_or_default()
            ))
        })?,
    };
    let v = obj([
        ("manager", plain(e.manager.take())),
        ("operation", plain(e.operation.take())),
        ("apiVersion", plain(e.api_version.take())),
        ("time", time(e.time.take())),
        ("fieldsType", plain(e.fields_type.take())),
        ("fieldsV1", fields),
        ("subresource", plain(e.subresource.take())),
    ]);
    done(&e, "ManagedFieldsEntry")?;
    Ok(v)
}

fn owner_reference(mut o: meta::OwnerReference) -> R {
    let v = obj([
        ("apiVersion", plain(o.api_version.take())),
        ("kind", plain(o.kind.take())),
        ("name", plain(o.name.take())),
        ("uid", plain(o.uid.take())),
        ("controller", ptr(o.controller.take())),
        ("blockOwnerDeletion", ptr(o.block_owner_deletion.take())),
    ]);
    done(&o, "OwnerReference")?;
    Ok(v)
}

/// A `metav1.Time`: RFC 3339 seconds; the zero time is absent.
pub(super) fn time(t: Option<meta::Time>) -> Value {
    let Some(t) = t else { return Value::Null };
    let secs = t.seconds.unwrap_or(0);
    if secs == 0 && t.nanos.unwrap_or(0) == 0 {
        return Value::Null;
    }
    match jiff::Timestamp::from_second(secs) {
        Ok(ts) => json!(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        Err(_) => Value::Null,
    }
}

/// A `metav1.MicroTime`: RFC 3339 with microseconds, as Go writes it; the zero time is absent.
pub(super) fn micro_time(t: Option<meta::MicroTime>) -> Value {
    let Some(t) = t else { return Value::Null };
    let (secs, nanos) = (t.seconds.unwrap_or(0), t.nanos.unwrap_or(0));
    if secs == 0 && nanos == 0 {
        return Value::Null;
    }
    // Go truncates to the microsecond.
    match jiff::Timestamp::new(secs, nanos - nanos % 1000) {
        Ok(ts) => json!(ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()),
        Err(_) => Value::Null,
    }
}

/// `metav1.LabelSelector`, when present.
pub(super) fn label_selector(s: Option<meta::LabelSelector>) -> R {
    nested(s, |mut s| {
        let v = obj([
            ("matchLabels", string_map(std::mem::take(&mut s.match_labels))),
            (
                "matchExpressions",
                list(std::mem::take(&mut s.match_expressions), |mut e| {
                    let v = obj([
                        ("key", plain(e.key.take())),
                        ("operator", plain(e.operator.take())),
                        ("values", strings(std::mem::take(&mut e.values))),
                    ]);
                    done(&e, "LabelSelectorRequirement")?;
                    Ok(v)
                })?,
            ),
        ]);
        done(&s, "LabelSelector")?;
        Ok(v)
    })
}

pub(super) fn int_or_string(v: Option<IntOrString>) -> Value {
    match v {
        None => Value::Null,
        Some(v) if v.r#type == Some(1) => json!(v.str_val.unwrap_or_default()),
        Some(v) => json!(v.int_val.unwrap_or(0)),
    }
}

pub(super) fn quantity(q: Option<Quantity>) -> Value {
    q.map_or(Value::Null, |q| json!(q.string.unwrap_or_default()))
}

/// A map of quantities (`resources.limits`), absent when empty.
pub(super) fn quantities(m: BTreeMap<String, Quantity>) -> Value {
    if m.is_empty() {
        return Value::Null;
    }
    Value::Object(m.into_iter().map(|(k, q)| (k, quantity(Some(q)))).collect())
}
