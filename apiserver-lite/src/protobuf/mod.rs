//! Protobuf request bodies, as kubectl's and client-go's typed clients send them (`kubectl
//! create deployment`, `serviceaccount`, `token`, `auth can-i`, a kubelet's Node and Lease, an
//! event recorder's Events), for every kind this server serves: the `k8s\0` envelope holding a
//! `runtime.Unknown`, decoded with the `k8s-pb` message types and turned into the JSON the rest
//! of the server works with.
//!
//! Presence decides what appears: Go writes every plain field, zero or not, and pointer fields
//! only when set, so a converter keeps a pointer field whenever it is present ([`ptr`]) and drops
//! a plain field's zero value ([`plain`] and friends), as Go's JSON encoding would. Converters
//! take each field they read out of the message; what is left must be zero values, or the body
//! is refused (415, naming the message type) rather than a field silently dropped.
//!
//! - this file: the envelope, the helpers and the leftover check;
//! - [`meta`]: object metadata, selectors, times, quantities;
//! - [`pod`]: pod templates, specs, containers, volumes;
//! - [`apps`]: Deployments, ReplicaSets, DaemonSets, ControllerRevisions;
//! - [`core`]: the other core/v1 kinds (ServiceAccount, Node, Event, Endpoints);
//! - [`kinds`]: the dispatch by type; Jobs, CronJobs, Namespaces, ConfigMaps, Secrets, Services;
//! - [`coordination`]: Leases; [`events`]: `events.k8s.io` Events;
//! - [`reviews`]: the access, rules, self-subject and token reviews, and TokenRequest;
//! - [`rbac`]: roles, cluster roles and their bindings;
//! - [`policy`]: `pods/eviction`'s Eviction and the `DeleteOptions` of an eviction or a delete.

mod apps;
mod coordination;
mod core;
mod events;
mod kinds;
mod meta;
mod pod;
mod policy;
mod rbac;
mod reviews;

use prost::Message;
use serde_json::{Map, Value, json};

use crate::errors::ApiError;

/// The envelope's magic prefix.
pub const MAGIC: &[u8] = b"k8s\0";
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// A conversion's result.
type R<T = Value> = Result<T, ApiError>;

fn decode_err(e: prost::DecodeError) -> ApiError {
    ApiError::bad_request(format!("the protobuf body could not be decoded: {e}"))
}

/// Decodes a protobuf body into the object's JSON.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ApiError::bad_request("the protobuf body lacks the k8s envelope"))?;
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest).map_err(decode_err)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let (api_version, kind) = (tm.api_version.unwrap_or_default(), tm.kind.unwrap_or_default());
    let raw = unknown.raw.unwrap_or_default();
    let mut v = kinds::decode(&api_version, &kind, &raw)?;
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    Ok(v)
}

/// Decodes `raw` as message `M`.
fn message<M: Message + Default>(raw: &[u8]) -> R<M> {
    M::decode(raw).map_err(decode_err)
}

/// A pointer field: kept whenever present, zero included.
fn ptr<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

/// A plain string field: Go's encoding omits the empty string.
fn plain(v: Option<String>) -> Value {
    v.filter(|s| !s.is_empty()).map_or(Value::Null, Value::String)
}

/// A plain boolean field: omitted when false.
fn flag(v: Option<bool>) -> Value {
    if v == Some(true) { Value::Bool(true) } else { Value::Null }
}

/// A plain integer field: omitted when zero.
fn number<T: Into<i64>>(v: Option<T>) -> Value {
    match v.map(Into::into) {
        Some(n) if n != 0 => json!(n),
        _ => Value::Null,
    }
}

/// A repeated field: omitted when empty.
fn list<T>(items: Vec<T>, f: impl Fn(T) -> R) -> R {
    if items.is_empty() {
        return Ok(Value::Null);
    }
    Ok(Value::Array(items.into_iter().map(f).collect::<Result<_, _>>()?))
}

/// A string list: omitted when empty.
fn strings(items: Vec<String>) -> Value {
    if items.is_empty() { Value::Null } else { json!(items) }
}

/// A string map: omitted when empty.
fn string_map(m: std::collections::BTreeMap<String, String>) -> Value {
    if m.is_empty() { Value::Null } else { json!(m) }
}

/// A nested message: converted when present.
fn nested<T>(v: Option<T>, f: impl FnOnce(T) -> R) -> R {
    v.map_or(Ok(Value::Null), f)
}

/// Every field a converter did not take out of `m` must be a zero value; otherwise the body
/// carries something this server would drop, and it is refused.
fn done<M: Message>(m: &M, what: &str) -> R<()> {
    if all_zero(&m.encode_to_vec(), 0) {
        return Ok(());
    }
    Err(ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the protobuf body sets fields of {what} this server does not read from protobuf; send the object as JSON or YAML"
        ),
    ))
}

/// Whether encoded protobuf fields are all zero: varints and fixed values 0, and
/// length-delimited values empty or themselves all zero (nested messages). Bounded in depth.
fn all_zero(mut b: &[u8], depth: u32) -> bool {
    if depth > 16 {
        return false;
    }
    while !b.is_empty() {
        let Ok(key) = prost::encoding::decode_varint(&mut b) else { return false };
        let zero = match key & 7 {
            0 => prost::encoding::decode_varint(&mut b).is_ok_and(|v| v == 0),
            1 => take(&mut b, 8).is_some_and(|x| x.iter().all(|c| *c == 0)),
            5 => take(&mut b, 4).is_some_and(|x| x.iter().all(|c| *c == 0)),
            2 => match prost::encoding::decode_varint(&mut b) {
                Ok(len) => usize::try_from(len)
                    .ok()
                    .and_then(|len| take(&mut b, len))
                    .is_some_and(|payload| all_zero(payload, depth + 1)),
                Err(_) => false,
            },
            _ => false,
        };
        if !zero {
            return false;
        }
    }
    true
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (head, tail) = b.split_at(n);
    *b = tail;
    Some(head)
}

/// Builds an object from (key, value) pairs; a null value is an absent field and is left out.
/// (Only here: JSON carried verbatim, such as a ControllerRevision's data, keeps its nulls.)
fn obj<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Map<_, _>>(),
    )
}

#[cfg(test)]
mod tests;
