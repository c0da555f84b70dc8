//! `DefaultTolerationSeconds`: a pod that does not tolerate the node lifecycle's `NoExecute`
//! taints (`node.kubernetes.io/not-ready`, `node.kubernetes.io/unreachable`) gets tolerations
//! for them with a limit (300 s unless configured), so its eviction from a dead node waits that
//! long and no longer. On creates and updates, as upstream.

use k8s_openapi::api::core::v1::Toleration;

/// The taint a node gets while its Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint a node gets while its Ready condition is Unknown (its kubelet is silent).
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// Whether `t` tolerates the `NoExecute` taint `key` (an empty key or effect matches any).
fn tolerates(t: &Toleration, key: &str) -> bool {
    let k = t.key.as_deref().unwrap_or_default();
    let effect = t.effect.as_deref().unwrap_or_default();
    (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
}

/// Adds the missing tolerations to a pod's; whether it added any.
pub fn admit(
    tolerations: &mut Vec<Toleration>,
    not_ready_seconds: i64,
    unreachable_seconds: i64,
) -> bool {
    let mut added = false;
    for (key, seconds) in
        [(TAINT_NOT_READY, not_ready_seconds), (TAINT_UNREACHABLE, unreachable_seconds)]
    {
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
