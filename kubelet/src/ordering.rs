//! Declared start order between a node's pods (★: upstream has none, kubernetes#119727,
//! kubeadm#3207): `kubelet-rs.io/after: etcd,kube-apiserver` on a pod holds its *first* start
//! until the named static pods of this node are Ready. A name is a manifest's `metadata.name`
//! (the pod runs as `<name>-<node>`), in the pod's namespace, or `namespace/name`.
//!
//! - Only the first start waits: a pod the runtime already runs (after a kubelet restart, or
//!   once released) is never held again, so a dependency's later restart restarts nothing.
//! - A held pod is `Pending`, its containers waiting with reason [`REASON`] and the names it
//!   waits for (its mirror shows the same).
//! - A name no pod of the node has keeps the pod waiting, reported; a pod naming itself is
//!   refused with its manifest ([`parse`]); pods whose declarations form a cycle are started
//!   without waiting, the cycle reported ([`cycle`]), so a mistake never holds a node's
//!   control plane down.

use std::collections::{BTreeSet, HashMap};

use api::keys;
use k8s_openapi::api::core::v1::Pod;

/// The waiting reason of a held pod's containers.
pub const REASON: &str = "WaitingForDependencies";

/// A pod of this node, by namespace and the name it runs as.
pub type PodName = (String, String);

/// The pods `value` names, as they run on `node`, for a pod in `namespace` named `own` (its
/// manifest name): empty entries are skipped, a name must be a DNS subdomain, and a pod may
/// not name itself.
pub fn parse(value: &str, namespace: &str, own: &str, node: &str) -> Result<Vec<PodName>, String> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (ns, name) = entry.split_once('/').unwrap_or((namespace, entry));
        for part in [ns, name] {
            if let Some(why) = api::validation::names::dns1123_subdomain(part) {
                return Err(format!("{entry:?}: {why}"));
            }
        }
        if ns == namespace && name == own {
            return Err(format!("{entry:?}: a pod cannot wait for itself"));
        }
        out.push((ns.to_string(), api::static_pod::static_pod_name(name, node)));
    }
    Ok(out)
}

/// What `pod` declares it waits for (an unparsable declaration, refused at validation, is
/// none).
pub fn after(pod: &Pod) -> Vec<PodName> {
    let Some(value) = pod.metadata.annotations.as_ref().and_then(|a| a.get(keys::STATIC_AFTER))
    else {
        return Vec::new();
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    // A static pod runs as `<name>-<node>`: its manifest name is what it may not name.
    let suffix = format!("-{}", node.to_lowercase());
    let own = name.strip_suffix(&suffix).unwrap_or(name);
    parse(value, namespace, own, node).unwrap_or_default()
}

/// A pod of the node as the gate sees it.
#[derive(Debug, Clone)]
pub struct Known {
    pub ready: bool,
    pub after: Vec<PodName>,
}

/// A cycle through `start` in the declarations of `pods`, as the names along it.
pub fn cycle(start: &PodName, pods: &HashMap<PodName, Known>) -> Option<Vec<PodName>> {
    fn walk(
        at: &PodName,
        start: &PodName,
        pods: &HashMap<PodName, Known>,
        path: &mut Vec<PodName>,
        seen: &mut BTreeSet<PodName>,
    ) -> bool {
        let Some(known) = pods.get(at) else { return false };
        for next in &known.after {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(next, start, pods, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.clone()];
    walk(start, start, pods, &mut path, &mut BTreeSet::new()).then(|| {
        path.push(start.clone());
        path
    })
}

fn show(p: &PodName) -> String {
    format!("{}/{}", p.0, p.1)
}

/// Why `pod` (named `me`) may not start yet, or `None`: the pods it waits for that are not
/// Ready (or not on the node), unless its declarations are part of a cycle.
pub fn blocked(me: &PodName, pod: &Pod, pods: &HashMap<PodName, Known>) -> Option<String> {
    let after = after(pod);
    if after.is_empty() {
        return None;
    }
    if let Some(cycle) = cycle(me, pods) {
        let cycle: Vec<String> = cycle.iter().map(show).collect();
        tracing::warn!(pod = %show(me), cycle = %cycle.join(" → "), "kubelet-rs.io/after declarations form a cycle: started without waiting");
        return None;
    }
    let missing: Vec<String> = after
        .iter()
        .filter(|p| !pods.get(*p).is_some_and(|k| k.ready))
        .map(|p| match pods.get(p) {
            Some(_) => show(p),
            None => format!("{} (no such pod on this node)", show(p)),
        })
        .collect();
    (!missing.is_empty())
        .then(|| format!("waiting for {} to be Ready ({})", missing.join(", "), keys::STATIC_AFTER))
}

#[cfg(test)]
mod tests;
