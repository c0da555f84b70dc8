//! Object lifecycle rules, as upstream's REST strategies apply them: decoding into the typed
//! object (unknown fields dropped, or refused with `fieldValidation=Strict`), defaulting, the
//! metadata a create sets, what an update may change, and validation.
//!
//! - this file: the lifecycle every kind shares, each step asking the resource type's
//!   [`Strategy`](crate::kinds::Strategy) for its kind's part;
//! - [`core`]: pods, namespaces, services;
//! - [`secret`]: Secrets (`stringData`, types, immutability);
//! - [`config_map`]: ConfigMaps (keys, size, immutability);
//! - [`apps`]: Deployments, ReplicaSets, DaemonSets;
//! - [`batch`]: Jobs and CronJobs;
//! - [`rbac`]: roles, cluster roles and their bindings.

pub(crate) mod apps;
pub(crate) mod batch;
pub(crate) mod config_map;
pub(crate) mod core;
pub mod rbac;
pub(crate) mod secret;

use api::validation::{ErrorList, Path};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rand::Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::resources::{ResourceType, Subresource};

pub use batch::time_zone;

/// `fieldValidation`: what to do with fields the type does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    pub fn parse(v: Option<&str>) -> Result<Self, ApiError> {
        match v {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Strict, Warn or Ignore, not {other:?}"
            ))),
        }
    }
}

/// RFC 3339 with seconds, as metadata timestamps are written.
pub fn now_rfc3339() -> String {
    format!("{:.0}", jiff::Timestamp::now())
}

/// A random version 4 UUID.
pub fn new_uid() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122's variant: 8, 9, a or b
    let mut out = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(x >> 4)]));
        out.push(char::from(HEX[usize::from(x & 15)]));
    }
    out
}

/// upstream's generated-name suffix alphabet (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub fn generate_name(prefix: &str) -> String {
    let mut rng = rand::rng();
    let base: String = prefix.chars().take(58).collect();
    let suffix: String =
        (0..5).map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char).collect();
    format!("{base}{suffix}")
}

pub(crate) fn decode_typed<T: DeserializeOwned + Serialize>(
    r: &ResourceType,
    obj: Value,
) -> Result<(Value, Vec<String>), ApiError> {
    decode_converted::<T>(r, obj, |_| {})
}

/// [`decode_typed`], with `convert` applied to the typed object (upstream's conversion to its
/// internal type, for the kinds where that changes something).
pub(crate) fn decode_converted<T: DeserializeOwned + Serialize>(
    r: &ResourceType,
    obj: Value,
    convert: impl FnOnce(&mut T),
) -> Result<(Value, Vec<String>), ApiError> {
    let mut decoded = api::decode::decode::<T>(obj).map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version {:?} cannot be handled as a {}: {e}",
            r.kind, r.version, r.kind
        ))
    })?;
    convert(&mut decoded.value);
    let value =
        serde_json::to_value(decoded.value).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((value, decoded.unknown_fields))
}

/// Decodes `obj` as the resource's type: wrong types fail with the field path, unknown fields are
/// reported (and dropped, as upstream stores only what the type holds), and the kind's typed
/// defaults are applied. A Secret's `stringData` is merged into its `data` here, so no rule,
/// store or reader ever sees it.
pub fn decode(r: &ResourceType, obj: Value) -> Result<(Value, Vec<String>), ApiError> {
    (r.strategy.decode)(r, obj)
}

/// The typed form of an object that has already been decoded as its type (read in place, not
/// from a copy).
pub(crate) fn typed<T: DeserializeOwned>(obj: &Value) -> Result<T, ApiError> {
    T::deserialize(obj).map_err(|e| ApiError::bad_request(e.to_string()))
}

pub(crate) fn untyped<T: Serialize>(t: &T) -> Result<Value, ApiError> {
    serde_json::to_value(t).map_err(|e| ApiError::internal(e.to_string()))
}

/// Reads `obj` as `T`, lets `f` change it, writes it back.
pub(crate) fn with_typed<T: DeserializeOwned + Serialize>(
    obj: &mut Value,
    f: impl FnOnce(&mut T),
) -> Result<(), ApiError> {
    let mut t: T = typed(obj)?;
    f(&mut t);
    *obj = untyped(&t)?;
    Ok(())
}

/// A pod template's spec defaulted as a pod's is.
fn default_template(t: &mut PodTemplateSpec) {
    let mut pod = Pod { spec: t.spec.take(), ..Default::default() };
    api::defaults::default_pod(&mut pod);
    t.spec = pod.spec;
}

pub(crate) fn set_default(obj: &mut Value, path: &[&str], value: Value) {
    let mut v = obj;
    for p in &path[..path.len() - 1] {
        if !v[*p].is_object() {
            v[*p] = json!({});
        }
        v = &mut v[*p];
    }
    let last = path[path.len() - 1];
    if v[last].is_null() {
        v[last] = value;
    }
}

/// Upstream's defaults for the kinds that have them.
pub fn apply_defaults(r: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    (r.strategy.defaults)(obj)
}

/// What a create sets beyond metadata, once defaults are in (upstream's `PrepareForCreate`):
/// no status from the client, a pod's initial status, a Job's generated selector.
pub fn prepare_for_create(r: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    (r.strategy.prepare_for_create)(obj)
}

fn metadata_of(obj: &Value) -> ObjectMeta {
    serde::Deserialize::deserialize(&obj["metadata"]).unwrap_or_default()
}

/// Upstream's `ValidateObjectMeta` for a kind without rules of its own: names, labels,
/// annotations, owner references, finalizers.
pub(crate) fn validate_meta(r: &ResourceType, obj: &Value) -> ErrorList {
    let meta = metadata_of(obj);
    let path = Path::root("metadata");
    if r.namespaced {
        api::validation::pod::validate_object_meta(&meta, &path)
    } else {
        let mut m = meta;
        m.namespace = Some("cluster-scoped".into()); // the rule for namespaced objects, minus the namespace
        api::validation::pod::validate_object_meta(&m, &path)
    }
}

/// [`validate_meta`], for kinds whose name is a DNS label (namespaces, services).
pub(crate) fn validate_meta_dns_label(r: &ResourceType, obj: &Value) -> ErrorList {
    let mut errs = validate_meta(r, obj);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if !name.is_empty() && !errs.0.iter().any(|e| e.field == "metadata.name") {
        let path = Path::root("metadata").child("name");
        for m in api::validation::names::dns1123_label(name) {
            errs.push(api::validation::FieldError::invalid(&path, name, m));
        }
    }
    errs
}

/// The metadata's errors, then the kind's own.
pub(crate) fn with_meta(r: &ResourceType, obj: &Value, kind: ErrorList) -> ErrorList {
    let mut errs = validate_meta(r, obj);
    errs.extend(kind);
    errs
}

fn invalid(r: &ResourceType, obj: &Value, errs: ErrorList) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    errs.into_result().map_err(|e| ApiError::invalid(r, name, &e))
}

/// Create validation: each kind's rules, with upstream's paths and messages.
pub fn validate(r: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let errs = (r.strategy.validate)(r, obj)?;
    invalid(r, obj, errs)
}

/// Update validation: the object's own rules with what may not change since `old`; for the
/// `status` subresource, the status rules.
pub fn validate_update(
    r: &ResourceType,
    sub: Option<Subresource>,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let mut errs = ErrorList::default();
    let (old_meta, new_meta) = (metadata_of(old), metadata_of(new));
    if old_meta.deletion_timestamp.is_some() {
        api::validation::meta::validate_no_new_finalizers(
            new_meta.finalizers.as_deref().unwrap_or_default(),
            old_meta.finalizers.as_deref().unwrap_or_default(),
            &Path::root("metadata").child("finalizers"),
            &mut errs,
        );
    }
    let rules = match sub {
        Some(Subresource::Status) => r.strategy.validate_status_update,
        _ => r.strategy.validate_update,
    };
    errs.extend(rules(r, old, new)?);
    invalid(r, new, errs)
}

/// Checks `apiVersion`/`kind` against the URL (filling them when absent, as the real server does
/// for clients that omit them).
pub fn check_type(r: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body of the request must be a JSON object"));
    }
    let gv = r.group_version();
    match obj["apiVersion"].as_str() {
        None | Some("") => obj["apiVersion"] = json!(gv),
        Some(v) if v == gv => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({gv})"
            )));
        }
    }
    match obj["kind"].as_str() {
        None | Some("") => obj["kind"] = json!(r.kind),
        Some(k) if k == r.kind => {}
        Some(k) => {
            // Upstream's prefix (its decoder fails converting one kind into the other), with
            // the reason in plain words.
            return Err(ApiError::bad_request(format!(
                "{k} in version {:?} cannot be handled as a {}: the kind in the data ({k}) does not match the expected kind of {} ({})",
                obj["apiVersion"].as_str().unwrap_or_default(),
                r.kind,
                r.name,
                r.kind
            )));
        }
    }
    Ok(())
}

/// What a create sets in the metadata: namespace (from the URL), name (generated if asked),
/// uid, timestamps and generation.
pub fn prepare_create(
    r: &ResourceType,
    namespace: Option<&str>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let meta = &mut obj["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    if meta["resourceVersion"].as_str().is_some_and(|v| !v.is_empty()) {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    if r.namespaced {
        let ns = namespace.unwrap_or_default();
        match meta["namespace"].as_str() {
            None | Some("") => meta["namespace"] = json!(ns),
            Some(given) if given == ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
    if meta["name"].as_str().unwrap_or_default().is_empty()
        && let Some(prefix) = meta["generateName"].as_str().filter(|p| !p.is_empty())
    {
        meta["name"] = json!(generate_name(prefix));
    }
    meta["uid"] = json!(new_uid());
    meta["creationTimestamp"] = json!(now_rfc3339());
    meta["generation"] = json!(1);
    if let Some(m) = meta.as_object_mut() {
        // managedFields stay: the field manager decides what a creation keeps of them.
        for gone in ["deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
            m.remove(gone);
        }
    }
    Ok(())
}

/// What an update keeps from the stored object, and whether it bumps the generation.
pub fn prepare_update(
    r: &ResourceType,
    subresource: Option<Subresource>,
    old: &Value,
    new: &mut Value,
) -> Result<(), ApiError> {
    for immutable in [
        "uid",
        "creationTimestamp",
        "name",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        if old["metadata"][immutable].is_null() {
            if let Some(m) = new["metadata"].as_object_mut() {
                m.remove(immutable);
            }
        } else {
            new["metadata"][immutable] = old["metadata"][immutable].clone();
        }
    }
    let has_status = r.has_subresource(Subresource::Status);
    match subresource {
        Some(Subresource::Status) => {
            // A status update changes only the status.
            let status = new["status"].take();
            *new = old.clone();
            new["status"] = status;
        }
        // A binding sets spec.nodeName and the PodScheduled condition together; its own rule
        // (`binding::Binding::assign`) decides both.
        Some(Subresource::Binding) => {}
        _ if has_status => new["status"] = old["status"].clone(),
        _ => {}
    }
    let spec_changed = old.get("spec") != new.get("spec") && new.get("spec").is_some();
    // Deployments copy their annotations to their ReplicaSets, so a change there is a change
    // of what is wanted too.
    let annotations_changed = r.strategy.annotations_are_spec
        && old["metadata"]["annotations"] != new["metadata"]["annotations"];
    if spec_changed || annotations_changed {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
        new["metadata"]["generation"] = json!(generation + 1);
    }
    if subresource.is_none() {
        (r.strategy.prepare_for_update)(old, new);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
