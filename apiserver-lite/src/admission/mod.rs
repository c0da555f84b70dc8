//! Admission: what the server changes in an object a client sends, after defaults and before
//! validation, as upstream's default-on mutating plugins do. One is here so far,
//! `DefaultTolerationSeconds`: a pod that does not tolerate the node lifecycle's `NoExecute`
//! taints (`node.kubernetes.io/not-ready`, `node.kubernetes.io/unreachable`) gets tolerations
//! for them with a limit (300 s unless configured), so its eviction from a dead node waits that
//! long and no longer.

use k8s_openapi::api::core::v1::{Pod, Toleration};
use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::ResourceType;

/// The taint a node gets while its Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint a node gets while its Ready condition is Unknown (its kubelet is silent).
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// The admission plugins' settings (kube-apiserver's flags of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// `--default-not-ready-toleration-seconds`.
    pub default_not_ready_toleration_seconds: i64,
    /// `--default-unreachable-toleration-seconds`.
    pub default_unreachable_toleration_seconds: i64,
}

impl Default for Admission {
    fn default() -> Self {
        Self {
            default_not_ready_toleration_seconds: 300,
            default_unreachable_toleration_seconds: 300,
        }
    }
}

/// Whether `t` tolerates the `NoExecute` taint `key` (an empty key or effect matches any).
fn tolerates(t: &Toleration, key: &str) -> bool {
    let k = t.key.as_deref().unwrap_or_default();
    let effect = t.effect.as_deref().unwrap_or_default();
    (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
}

impl Admission {
    /// Runs the plugins on an object created or updated through the main resource (not a
    /// subresource).
    pub fn admit(
        &self,
        r: &ResourceType,
        sub: Option<&str>,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        if !(r.group.is_empty() && r.kind == "Pod") || sub.is_some() {
            return Ok(());
        }
        let mut pod: Pod = serde_json::from_value(obj.clone())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        if self.default_toleration_seconds(&mut pod) {
            *obj = serde_json::to_value(pod).map_err(|e| ApiError::internal(e.to_string()))?;
        }
        Ok(())
    }

    /// `DefaultTolerationSeconds`; whether it added anything.
    fn default_toleration_seconds(&self, pod: &mut Pod) -> bool {
        let spec = pod.spec.get_or_insert_with(Default::default);
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        let mut added = false;
        for (key, seconds) in [
            (TAINT_NOT_READY, self.default_not_ready_toleration_seconds),
            (TAINT_UNREACHABLE, self.default_unreachable_toleration_seconds),
        ] {
            if !tolerations.iter().any(|t| tolerates(t, key)) {
                tolerations.push(Toleration {
                    key: Some(key.into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoExecute".into()),
                    toleration_seconds: Some(seconds),
                    value: None,
                });
                added = true;
            }
        }
        added
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::resources::find;

    #[test]
    fn pods_get_the_node_lifecycle_tolerations_unless_they_have_them() {
        let pods = find("", "v1", "pods").unwrap();
        let a = Admission { default_not_ready_toleration_seconds: 60, ..Admission::default() };
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        a.admit(pods, None, &mut pod).unwrap();
        assert_eq!(
            pod["spec"]["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ])
        );
        // One it tolerates already (any effect counts) is left alone; a toleration of every
        // taint covers both.
        let mut own = json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}});
        a.admit(pods, None, &mut own).unwrap();
        let keys: Vec<&str> = own["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]);
        let mut all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        a.admit(pods, None, &mut all).unwrap();
        assert_eq!(all["spec"]["tolerations"].as_array().unwrap().len(), 1);
        // A NoSchedule toleration of the key does not count; subresources and other kinds
        // are not touched.
        let mut no_schedule = json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]}});
        a.admit(pods, None, &mut no_schedule).unwrap();
        assert_eq!(no_schedule["spec"]["tolerations"].as_array().unwrap().len(), 3);
        let mut status = json!({"spec": {}});
        a.admit(pods, Some("status"), &mut status).unwrap();
        assert_eq!(status, json!({"spec": {}}));
        let mut cm = json!({"data": {}});
        a.admit(find("", "v1", "configmaps").unwrap(), None, &mut cm).unwrap();
        assert_eq!(cm, json!({"data": {}}));
    }
}
