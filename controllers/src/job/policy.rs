//! A Job's pod failure policy, as upstream's `matchPodFailurePolicy`: the first rule whose
//! `onExitCodes` (a container's non-zero exit code In / NotIn the values, optionally only for a
//! named container) or `onPodConditions` (a pod condition of that type and status) matches a
//! failed pod decides its action.

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyRule};
use k8s_openapi::api::core::v1::Pod;

/// What a rule says to do with a failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Fail the Job at once, with upstream's message.
    FailJob(String),
    /// Fail the pod's index (Indexed Jobs with `backoffLimitPerIndex`).
    FailIndex,
    /// Do not count the failure.
    Ignore,
    /// Count it (the default when no rule matches).
    Count,
}

fn action(rule: &PodFailurePolicyRule, message: String) -> Action {
    match rule.action.as_str() {
        "FailJob" => Action::FailJob(message),
        "FailIndex" => Action::FailIndex,
        "Ignore" => Action::Ignore,
        _ => Action::Count,
    }
}

/// The action for a failed pod.
pub fn evaluate(policy: &PodFailurePolicy, pod: &Pod) -> Action {
    let (ns, name) = (
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    );
    let status = pod.status.as_ref();
    let containers = status.into_iter().flat_map(|s| {
        s.init_container_statuses.iter().flatten().chain(s.container_statuses.iter().flatten())
    });
    let exits: Vec<(&str, i32)> = containers
        .filter_map(|c| {
            let t = c.state.as_ref()?.terminated.as_ref()?;
            (t.exit_code != 0).then_some((c.name.as_str(), t.exit_code))
        })
        .collect();
    for (index, rule) in policy.rules.iter().enumerate() {
        if let Some(req) = &rule.on_exit_codes {
            let matched = exits.iter().find(|(c, code)| {
                req.container_name.as_deref().is_none_or(|n| n == *c)
                    && match req.operator.as_str() {
                        "In" => req.values.contains(code),
                        "NotIn" => !req.values.contains(code),
                        _ => false,
                    }
            });
            if let Some((c, code)) = matched {
                let message = format!(
                    "Container {c} for pod {ns}/{name} failed with exit code {code} matching {} rule at index {index}",
                    rule.action
                );
                return action(rule, message);
            }
        }
        for pattern in rule.on_pod_conditions.iter().flatten() {
            let want = pattern.status.as_deref().filter(|s| !s.is_empty()).unwrap_or("True");
            let has = status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == pattern.type_ && c.status == want);
            if has {
                let message = format!(
                    "Pod {ns}/{name} has condition {} matching {} rule at index {index}",
                    pattern.type_, rule.action
                );
                return action(rule, message);
            }
        }
    }
    Action::Count
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn failed_pod(code: i32) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "containerStatuses": [{
                "name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code}}}],
                "conditions": [{"type": "DisruptionTarget", "status": "True"}]}
        }))
        .unwrap_or_default()
    }

    fn policy(v: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": v })).unwrap_or_default()
    }

    #[test]
    fn the_first_matching_rule_decides_with_upstreams_message() {
        let p = policy(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "Evicted", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        ]));
        assert_eq!(
            evaluate(&p, &failed_pod(42)),
            Action::FailJob(
                "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
                    .into()
            )
        );
        assert_eq!(evaluate(&p, &failed_pod(3)), Action::Count);
        assert_eq!(
            evaluate(&p, &failed_pod(1)),
            Action::Ignore,
            "NotIn 1 misses; the condition rule matches"
        );
        assert_eq!(evaluate(&policy(json!([])), &failed_pod(1)), Action::Count);
    }
}
