//! A DaemonSet's history as ControllerRevisions, as upstream's `constructHistory` and
//! `cleanupHistory`: one revision per template, named `<ds>-<hash>` and labelled
//! `controller-revision-hash: <hash>` (the label its pods carry), holding upstream's patch
//! (`{"spec": {"template": {..., "$patch": "replace"}}}`); the current one has the highest
//! `revision`. Revisions no pod uses beyond `revisionHistoryLimit` (10) go, oldest first.
//! `kubectl rollout history ds/<name>` lists them.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::ResourceExt;
use serde_json::json;

use super::util::REVISION_HASH_LABEL;
use crate::client::{ApiError, Client};
use crate::pods::{self, controller_of};

/// Upstream's default `revisionHistoryLimit`.
pub const DEFAULT_HISTORY_LIMIT: i32 = 10;

/// The ControllerRevision `ds` would have for its current template.
pub fn revision_for(ds: &DaemonSet, hash: &str, revision: i64) -> ControllerRevision {
    let template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let mut t = serde_json::to_value(&template).unwrap_or_default();
    t["$patch"] = json!("replace");
    go_typed_fields(&mut t);
    let mut labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.into(), hash.into());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", ds.name_any())),
            namespace: ds.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![pods::controller_ref(
                &ds.metadata,
                "apps/v1",
                "DaemonSet",
            )]),
            ..Default::default()
        },
        data: Some(RawExtension(json!({"spec": {"template": t}}))),
        revision,
    }
}

/// Adds what Go's marshaling of a typed pod template always writes and ours omits when
/// unset: `metadata.creationTimestamp: null` and each container's `resources: {}`. kubectl
/// compares a revision's data with its own marshaling of the DaemonSet's template byte for
/// byte (`rollout undo` says "skipped rollback" only when they are equal), as upstream's
/// controller writes it.
fn go_typed_fields(t: &mut serde_json::Value) {
    t["metadata"]["creationTimestamp"] = serde_json::Value::Null;
    for list in ["initContainers", "containers"] {
        // `pointer_mut`, not indexing: indexing would add the missing list as `null`.
        let containers = t.pointer_mut(&format!("/spec/{list}")).and_then(|l| l.as_array_mut());
        for c in containers.into_iter().flatten() {
            if let Some(c) = c.as_object_mut() {
                c.entry("resources").or_insert_with(|| json!({}));
            }
        }
    }
}

/// The revisions `ds` controls.
pub fn owned(ds: &DaemonSet, all: Vec<Arc<ControllerRevision>>) -> Vec<Arc<ControllerRevision>> {
    let uid = ds.metadata.uid.as_deref().unwrap_or_default();
    all.into_iter().filter(|r| controller_of(&r.metadata).is_some_and(|o| o.uid == uid)).collect()
}

/// Revisions to delete: not current, not used by a pod, oldest first beyond the limit.
pub fn to_clean(
    ds: &DaemonSet,
    revisions: &[Arc<ControllerRevision>],
    current: &str,
    pods: &[Arc<Pod>],
) -> Vec<String> {
    let limit =
        ds.spec.as_ref().and_then(|s| s.revision_history_limit).unwrap_or(DEFAULT_HISTORY_LIMIT);
    let limit = usize::try_from(limit).unwrap_or(0);
    let live: HashSet<&str> = pods
        .iter()
        .filter_map(|p| p.metadata.labels.as_ref()?.get(REVISION_HASH_LABEL).map(String::as_str))
        .collect();
    let mut old: Vec<&Arc<ControllerRevision>> = revisions
        .iter()
        .filter(|r| r.name_any() != current)
        .filter(|r| {
            let hash = r.metadata.labels.as_ref().and_then(|l| l.get(REVISION_HASH_LABEL));
            !hash.is_some_and(|h| live.contains(h.as_str()))
        })
        .collect();
    if old.len() <= limit {
        return Vec::new();
    }
    old.sort_by_key(|r| r.revision);
    old.iter().take(old.len() - limit).map(|r| r.name_any()).collect()
}

/// Makes the current template's revision exist with the highest number (creating or bumping
/// it); its name.
pub async fn ensure_current<C: Client<ControllerRevision>>(
    client: &C,
    ds: &DaemonSet,
    hash: &str,
    revisions: &[Arc<ControllerRevision>],
) -> Result<String, ApiError> {
    let name = format!("{}-{hash}", ds.name_any());
    let max = revisions.iter().map(|r| r.revision).max().unwrap_or(0);
    match revisions.iter().find(|r| r.name_any() == name) {
        Some(current) if current.revision >= max => Ok(name),
        Some(current) => {
            let mut bumped = (**current).clone();
            bumped.revision = max + 1;
            client.replace(&bumped).await.map(|_| name)
        }
        None => match client.create(&revision_for(ds, hash, max + 1)).await {
            Ok(_) => Ok(name),
            // Already there (a cache behind the API): the next sync sees it.
            Err(e) if e.is_already_exists() => Ok(name),
            Err(e) => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_data_is_the_template_as_go_marshals_it() {
        let ds: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": "agent", "namespace": "default", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "a", "image": "busybox:1.35"},
                                        {"name": "b", "image": "busybox:1.35", "resources": {"limits": {"cpu": "1"}}}]}}}
        }))
        .unwrap();
        let data = revision_for(&ds, "h", 1).data.unwrap().0;
        let t = &data["spec"]["template"];
        assert_eq!(t["$patch"], "replace");
        assert!(t["metadata"].as_object().unwrap().contains_key("creationTimestamp"));
        assert!(t["metadata"]["creationTimestamp"].is_null());
        assert_eq!(t["spec"]["containers"][0]["resources"], json!({}));
        assert_eq!(t["spec"]["containers"][1]["resources"], json!({"limits": {"cpu": "1"}}));
        assert!(!t["spec"].as_object().unwrap().contains_key("initContainers"));
    }
}
