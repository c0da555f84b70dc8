//! The `autoscaling/v1` Scale of a kind whose replicas are `spec.replicas` (Deployments and
//! ReplicaSets): read from the object, written back into it, and as an apply configuration of
//! the object.

use api::validation::selector::Selector;
use serde_json::{Value, json};

use crate::resources::ResourceType;

/// How a kind's `scale` subresource maps to and from the object.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    /// The object's Scale.
    pub of: fn(&Value) -> Value,
    /// The object with `replicas` wanted.
    pub with_replicas: fn(&Value, i64) -> Value,
    /// An applied Scale's replicas (when given) as an apply configuration of the object `name`.
    pub config: fn(&ResourceType, &str, Option<&Value>) -> Value,
}

/// `spec.replicas`, `status.replicas` and `spec.selector`.
pub const REPLICAS: Scale = Scale { of, with_replicas, config };

/// The Scale: the object's replicas, and its selector in text form.
fn of(obj: &Value) -> Value {
    let m = &obj["metadata"];
    let typed = serde_json::from_value(obj["spec"]["selector"].clone()).ok();
    let selector =
        Selector::from_label_selector(typed.as_ref()).map(|s| s.text()).unwrap_or_default();
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"], "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]},
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector},
    })
}

fn with_replicas(old: &Value, replicas: i64) -> Value {
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(replicas);
    new
}

fn config(r: &ResourceType, name: &str, replicas: Option<&Value>) -> Value {
    let mut config =
        json!({"apiVersion": r.group_version(), "kind": r.kind, "metadata": {"name": name}});
    if let Some(replicas) = replicas {
        config["spec"] = json!({"replicas": replicas});
    }
    config
}
