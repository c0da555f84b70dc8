//! What a DaemonSet decides per node, pure, as upstream's `pkg/controller/daemon/util` and
//! `NodeShouldRunDaemonPod`: the tolerations every daemon pod gets, whether a node should run
//! (or keep running) the pod, the node a daemon pod is meant for, the template a pod is made
//! from (labels `controller-revision-hash` and `pod-template-generation`), and the required
//! node affinity `metadata.name In [node]` that pins a pod to its node while the scheduler
//! binds it.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, PodTemplateSpec, Toleration,
};

use scheduler::plugins::{node_affinity, taint_toleration};

/// The label naming the template revision a pod was made from.
pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// The (deprecated) label naming the template generation a pod was made from.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

pub use api::keys::{
    TAINT_DISK_PRESSURE, TAINT_MEMORY_PRESSURE, TAINT_NETWORK_UNAVAILABLE, TAINT_NOT_READY,
    TAINT_PID_PRESSURE, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE,
};

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.to_string()),
        operator: Some("Exists".into()),
        effect: Some(effect.to_string()),
        ..Default::default()
    }
}

/// Upstream's `AddOrUpdateDaemonPodTolerations`: daemon pods stay on not-ready and unreachable
/// nodes forever, and are placed despite pressure, cordoning and (host network only) an
/// unavailable network. A toleration with the same key and effect is replaced.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        exists(TAINT_NOT_READY, "NoExecute"),
        exists(TAINT_UNREACHABLE, "NoExecute"),
        exists(TAINT_DISK_PRESSURE, "NoSchedule"),
        exists(TAINT_MEMORY_PRESSURE, "NoSchedule"),
        exists(TAINT_PID_PRESSURE, "NoSchedule"),
        exists(TAINT_UNSCHEDULABLE, "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(exists(TAINT_NETWORK_UNAVAILABLE, "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_default();
    for t in wanted {
        match tolerations.iter_mut().find(|o| o.key == t.key && o.effect == t.effect) {
            Some(existing) => *existing = t,
            None => tolerations.push(t),
        }
    }
}

/// Whether a node should run the DaemonSet's pod, and whether a pod already there may stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub should_run: bool,
    pub should_continue_running: bool,
}

/// Upstream's `NodeShouldRunDaemonPod`: the template's `nodeName` (if set), its node selector
/// and required node affinity must match the node, and its tolerations (with the daemon
/// defaults) tolerate the node's `NoSchedule` and `NoExecute` taints; a pod already there
/// keeps running unless a `NoExecute` taint is untolerated. Taints of other effects
/// (`PreferNoSchedule`, or an effect this version does not know) do not keep pods off.
pub fn placement(ds: &DaemonSet, node: &Node) -> Placement {
    let none = Placement { should_run: false, should_continue_running: false };
    let Some(template) = ds.spec.as_ref().and_then(|s| s.template.spec.clone()) else {
        return none;
    };
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if template.node_name.as_deref().is_some_and(|n| !n.is_empty() && n != name) {
        return none;
    }
    let mut spec = template;
    add_daemon_tolerations(&mut spec);
    if !node_affinity::matches(&spec, node) {
        return none;
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    if taint_toleration::untolerated(tolerations, node).is_none() {
        return Placement { should_run: true, should_continue_running: true };
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    let evicting = taints
        .iter()
        .filter(|t| t.effect == "NoExecute")
        .any(|taint| !tolerations.iter().any(|t| taint_toleration::tolerates(t, taint)));
    Placement { should_run: false, should_continue_running: !evicting }
}

/// The `deprecated.daemonset.template.generation` annotation the apiserver keeps.
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata.annotations.as_ref()?.get(api::keys::DAEMONSET_TEMPLATE_GENERATION)?.parse().ok()
}

/// Upstream's `IsPodUpdated`: the pod carries the current hash or template generation.
pub fn is_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    let by_generation =
        generation.is_some_and(|g| label(TEMPLATE_GENERATION_LABEL) == Some(&g.to_string()));
    let by_hash = !hash.is_empty() && label(REVISION_HASH_LABEL) == Some(hash);
    by_generation || by_hash
}

/// Upstream's `CreatePodTemplate`: the template with the daemon tolerations and the revision
/// labels.
pub fn pod_template(ds: &DaemonSet, hash: &str) -> PodTemplateSpec {
    let mut t = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    add_daemon_tolerations(t.spec.get_or_insert_default());
    let labels = t.metadata.get_or_insert_default().labels.get_or_insert_default();
    if let Some(g) = template_generation(ds) {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(REVISION_HASH_LABEL.into(), hash.to_string());
    }
    t
}

/// Upstream's `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes one
/// term, `metadata.name In [node]`; preferred terms stay.
pub fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(vec![node.to_string()]),
        }]),
        ..Default::default()
    };
    let mut a = affinity.unwrap_or_default();
    let na = a.node_affinity.get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution =
        Some(NodeSelector { node_selector_terms: vec![term] });
    a
}

/// The node a daemon pod is for (upstream's `GetTargetNodeName`): its `nodeName` once bound,
/// else the single `metadata.name In [node]` of its required node affinity.
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(n.to_string());
    }
    let required = spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    required.node_selector_terms.iter().find_map(|t| {
        t.match_fields.iter().flatten().find_map(|r| {
            let values = r.values.as_deref().unwrap_or_default();
            (r.key == "metadata.name" && r.operator == "In" && values.len() == 1)
                .then(|| values[0].clone())
        })
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str, taints: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, e)| Taint {
                            key: (*k).into(),
                            effect: (*e).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ds() -> DaemonSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        }))
        .unwrap_or_default()
    }

    #[test]
    fn daemon_pods_tolerate_node_conditions_and_cordoning_but_not_other_taints() {
        let d = ds();
        let run = |taints: &[(&str, &str)]| placement(&d, &node("n", taints));
        let yes = Placement { should_run: true, should_continue_running: true };
        assert_eq!(run(&[]), yes);
        assert_eq!(
            run(&[(TAINT_NOT_READY, "NoExecute"), (TAINT_UNSCHEDULABLE, "NoSchedule")]),
            yes
        );
        assert_eq!(run(&[(TAINT_MEMORY_PRESSURE, "NoSchedule")]), yes);
        assert_eq!(run(&[("dedicated", "PreferNoSchedule"), ("odd", "Sometimes")]), yes);
        assert_eq!(
            run(&[("dedicated", "NoSchedule")]),
            Placement { should_run: false, should_continue_running: true }
        );
        assert_eq!(
            run(&[("dedicated", "NoExecute")]),
            Placement { should_run: false, should_continue_running: false }
        );
        // The network-unavailable toleration is for host-network pods only.
        assert!(!run(&[(TAINT_NETWORK_UNAVAILABLE, "NoSchedule")]).should_run);
        let mut host = ds();
        if let Some(s) = host.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
            s.host_network = Some(true);
        }
        assert!(
            placement(&host, &node("n", &[(TAINT_NETWORK_UNAVAILABLE, "NoSchedule")])).should_run
        );
    }

    #[test]
    fn pods_are_pinned_by_a_metadata_name_field_and_found_by_it() {
        let a = pin_to_node(None, "node-2");
        let pod = Pod {
            spec: Some(PodSpec { affinity: Some(a), ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(target_node(&pod).as_deref(), Some("node-2"));
        let t = pod_template(&ds(), "abc");
        let labels = t.metadata.and_then(|m| m.labels).unwrap_or_default();
        assert_eq!(labels.get(REVISION_HASH_LABEL).map(String::as_str), Some("abc"));
        assert_eq!(t.spec.and_then(|s| s.tolerations).map(|t| t.len()), Some(6));
    }
}
