//! `pods/binding`: assigning a pending pod to a node, as upstream's `assignPod`. The binding
//! names the node (`target.name`), may carry the pod's UID as a precondition and annotations to
//! add; the pod gets `spec.nodeName` and the `PodScheduled=True` condition, once.

use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::resources::ResourceType;

/// What a `Binding` body asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub node: String,
    pub uid: Option<String>,
    pub annotations: serde_json::Map<String, Value>,
}

impl Binding {
    pub fn parse(body: &Value) -> Result<Self, ApiError> {
        let node = body["target"]["name"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::bad_request("binding target name is required"))?
            .to_string();
        let uid = body["metadata"]["uid"].as_str().filter(|u| !u.is_empty()).map(str::to_string);
        let annotations = body["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
        Ok(Self { node, uid, annotations })
    }

    /// The pod `old` assigned to the binding's node at `now` (RFC 3339).
    pub fn assign(&self, pods: &ResourceType, old: &Value, now: &str) -> Result<Value, ApiError> {
        let name = old["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(uid) = &self.uid
            && old["metadata"]["uid"].as_str() != Some(uid.as_str())
        {
            let msg = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                old["metadata"]["uid"].as_str().unwrap_or_default()
            );
            return Err(ApiError::conflict(pods, name, &msg));
        }
        if old["metadata"]["deletionTimestamp"].is_string() {
            let msg = format!("pod {name} is being deleted, cannot be assigned to a host");
            return Err(ApiError::conflict(pods, name, &msg));
        }
        if let Some(current) = old["spec"]["nodeName"].as_str().filter(|s| !s.is_empty()) {
            let msg = format!("pod {name} is already assigned to node {current:?}");
            return Err(ApiError::conflict(pods, name, &msg));
        }
        let mut new = old.clone();
        new["spec"]["nodeName"] = json!(self.node);
        if !self.annotations.is_empty() {
            let meta = &mut new["metadata"];
            if !meta["annotations"].is_object() {
                meta["annotations"] = json!({});
            }
            if let Some(a) = meta["annotations"].as_object_mut() {
                a.extend(self.annotations.clone());
            }
        }
        let scheduled =
            json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now});
        let status = &mut new["status"];
        if !status.is_object() {
            *status = json!({});
        }
        let mut conditions: Vec<Value> = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] != "PodScheduled")
            .cloned()
            .collect();
        conditions.push(scheduled);
        status["conditions"] = Value::Array(conditions);
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::resources;

    fn pending() -> Value {
        json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
        })
    }

    fn binding(uid: Option<&str>) -> Binding {
        let mut b = json!({"target": {"kind": "Node", "name": "n1"},
                           "metadata": {"annotations": {"a": "b"}}});
        if let Some(uid) = uid {
            b["metadata"]["uid"] = json!(uid);
        }
        Binding::parse(&b).unwrap()
    }

    #[test]
    fn a_binding_sets_the_node_the_scheduled_condition_and_its_annotations() {
        let pods = &resources::PODS;
        let new = binding(Some("u1")).assign(pods, &pending(), "2026-11-22T08:00:00Z").unwrap();
        assert_eq!(new["spec"]["nodeName"], "n1");
        assert_eq!(new["metadata"]["annotations"]["a"], "b");
        let conditions = new["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1, "the Unschedulable condition is replaced");
        assert_eq!(conditions[0]["status"], "True");
        assert_eq!(conditions[0]["lastTransitionTime"], "2026-11-22T08:00:00Z");
    }

    #[test]
    fn a_binding_is_refused_for_another_uid_a_bound_pod_or_one_being_deleted() {
        let pods = &resources::PODS;
        let now = "2026-11-22T08:00:00Z";
        let err = binding(Some("u2")).assign(pods, &pending(), now).unwrap_err();
        assert!(err.to_string().contains("Precondition failed"), "{err}");
        let mut bound = pending();
        bound["spec"]["nodeName"] = json!("n0");
        assert!(binding(None).assign(pods, &bound, now).is_err());
        let mut deleting = pending();
        deleting["metadata"]["deletionTimestamp"] = json!(now);
        let err = binding(None).assign(pods, &deleting, now).unwrap_err();
        assert!(err.to_string().contains("is being deleted"), "{err}");
        assert!(Binding::parse(&json!({"target": {}})).is_err());
    }
}
