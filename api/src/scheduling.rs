//! What both the scheduler's filters and the kubelet's admission ask of a (pod, node) pair, as
//! upstream's `component-helpers/scheduling/corev1`: whether the pod's node selector and
//! required node affinity match the node, which of the node's taints its tolerations leave
//! untolerated, and which host ports it claims.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|w| w == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (value.and_then(int), values) else { return false };
            let Some(want) = int(want) else { return false };
            if r.operator == "Gt" { have > want } else { have < want }
        }
        _ => false,
    }
}

/// A term matches when it has at least one requirement and all of them match; `matchFields`
/// may only name `metadata.name` with `In`/`NotIn`.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs.iter().all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, Some(name))
        })
}

/// Upstream's `GetRequiredNodeAffinity(pod).Match(node)`: every `nodeSelector` label, and one
/// of the required affinity's terms (ORed; expressions within a term ANDed).
pub fn node_affinity_matches(spec: &PodSpec, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let selector_ok = spec.node_selector.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    match required {
        None => true,
        Some(sel) => {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            sel.node_selector_terms.iter().any(|t| term_matches(t, labels, name))
        }
    }
}

/// Upstream's `Toleration.ToleratesTaint`.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    if let Some(key) = t.key.as_deref().filter(|k| !k.is_empty())
        && key != taint.key
    {
        return false;
    }
    match t.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// Upstream's `FindMatchingUntoleratedTaint`: the first of the node's taints with one of
/// `effects` that no toleration tolerates.
pub fn untolerated_taint<'n>(
    node: &'n Node,
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'n Taint> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// A host port a pod claims: `hostIP` (`0.0.0.0` when unset), protocol (TCP when unset), port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

pub const WILDCARD_IP: &str = "0.0.0.0";

impl HostPort {
    /// Upstream's `HostPortInfo.CheckConflict`: same protocol and port, and the same address or
    /// either one the wildcard.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == WILDCARD_IP || other.ip == WILDCARD_IP)
    }
}

/// The host ports of the pod's containers and sidecars (init containers that keep running).
pub fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut ports = Vec::new();
    for c in spec.containers.iter().chain(sidecars) {
        for p in c.ports.iter().flatten().filter(|p| p.host_port.is_some_and(|h| h > 0)) {
            let or = |v: &Option<String>, default: &str| {
                v.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| default.to_string())
            };
            ports.push(HostPort {
                ip: or(&p.host_ip, WILDCARD_IP),
                protocol: or(&p.protocol, "TCP"),
                port: p.host_port.unwrap_or_default(),
            });
        }
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            ..Default::default()
        }
    }

    #[test]
    fn tolerations_match_as_upstream() {
        let t = taint("dedicated", "gpu", "NoSchedule");
        let cases = [
            (tol("dedicated", "Equal", "gpu", "NoSchedule"), true),
            (tol("dedicated", "", "gpu", ""), true),
            (tol("dedicated", "Equal", "cpu", ""), false),
            (tol("dedicated", "Exists", "", ""), true),
            (tol("", "Exists", "", ""), true),
            (tol("", "Exists", "", "NoExecute"), false),
            (tol("other", "Exists", "", ""), false),
            (tol("dedicated", "Lt", "gpu", ""), false),
        ];
        for (toleration, want) in cases {
            assert_eq!(tolerates(&toleration, &t), want, "{toleration:?}");
        }
    }

    #[test]
    fn only_taints_of_the_asked_effects_count() {
        let mut n = Node::default();
        n.spec.get_or_insert_default().taints =
            Some(vec![taint("a", "", "NoSchedule"), taint("b", "", "NoExecute")]);
        let none: &[Toleration] = &[];
        assert_eq!(untolerated_taint(&n, none, &["NoExecute"]).map(|t| t.key.as_str()), Some("b"));
        let tolerate_b = [tol("b", "Exists", "", "")];
        assert!(untolerated_taint(&n, &tolerate_b, &["NoExecute"]).is_none());
        assert_eq!(
            untolerated_taint(&n, &tolerate_b, &["NoSchedule", "NoExecute"]).map(|t| &t.key[..]),
            Some("a")
        );
    }
}
