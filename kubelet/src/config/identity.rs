//! Which UID a static pod runs under. Upstream derives it from the manifest's whole content,
//! so any edit (a label) replaces the pod, and a kubelet whose hashing differs (another build,
//! or upstream's own kubelet before ours) replaces every pod on the node. Here a manifest's
//! UID is kept as long as its *identity* holds:
//!
//! - the identity ([`identity`]) is the pod without what an API pod may change in place
//!   (labels, annotations, container images, `activeDeadlineSeconds`, tolerations), so an edit
//!   of those keeps the UID: a label changes nothing that runs, an image restarts its
//!   container only (as upstream's container hash decides);
//! - any other edit gives the content-derived UID, and the pod is replaced as upstream does;
//! - the first time a manifest is seen, a pod the runtime already runs under the same name
//!   from the file source is adopted (its UID kept) when it matches: by the identity it
//!   recorded on its sandbox, or, when it recorded none or another version (upstream's
//!   kubelet, an older build), by what the runtime says its sandbox and containers were
//!   created with ([`crate::runtime::adoption`]).
//!
//! The pod's `kubernetes.io/config.hash` stays its UID (events and `kubectl describe` find a
//! static pod's events through it); [`keys::STATIC_CONTENT`] changes with every edit, so the
//! mirror pod follows the content.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use api::keys;
use k8s_openapi::api::core::v1::Pod;
use sha2::{Digest, Sha256};

use crate::runtime::adoption::RunningPod;

/// The version of the fields [`identity`] compares; recorded before the digest.
pub const IDENTITY_VERSION: &str = "v1";

fn hex(digest: &[u8]) -> String {
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// `v1:<digest>` of the pod without what may change in place. The pod is as decoded and
/// defaulted; its UID, name suffix and the kubelet's own annotations do not count.
pub fn identity(pod: &Pod) -> String {
    let mut p = pod.clone();
    p.metadata.uid = None;
    p.metadata.labels = None;
    p.metadata.annotations = None;
    p.status = None;
    if let Some(spec) = p.spec.as_mut() {
        spec.active_deadline_seconds = None;
        spec.tolerations = None;
        for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            c.image = None;
        }
        for c in spec.ephemeral_containers.iter_mut().flatten() {
            c.image = None;
        }
    }
    let digest = Sha256::digest(serde_json::to_vec(&p).unwrap_or_default());
    format!("{IDENTITY_VERSION}:{}", hex(&digest))
}

/// What was decided for one manifest path.
#[derive(Debug, Clone)]
struct Assigned {
    /// The content-derived UID of the version decided for (it names the version).
    content: String,
    identity: String,
    uid: String,
}

/// How a static pod got its UID, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The content-derived UID (a new pod, or one whose identity changed).
    Content,
    /// The UID of the previous version of the same manifest (an in-place edit).
    Kept,
    /// The UID of a pod the runtime already ran.
    Adopted { by: AdoptedBy },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdoptedBy {
    /// The identity its sandbox recorded is the manifest's.
    RecordedIdentity,
    /// What its sandbox and containers were created with matches the manifest.
    RuntimeConfig,
}

/// The UIDs given to the manifests of one source, and the running pods that may be adopted.
#[derive(Debug, Default)]
pub struct Identities {
    assigned: HashMap<PathBuf, Assigned>,
    /// Pods running when the kubelet started, by `namespace/name`, until a manifest of that
    /// name is first seen.
    running: HashMap<String, RunningPod>,
}

impl Identities {
    pub fn new(running: Vec<RunningPod>) -> Self {
        let running = running.into_iter().map(|r| (r.full_name(), r)).collect();
        Self { assigned: HashMap::new(), running }
    }

    /// Sets `pod`'s UID (and `config.hash`) for the manifest at `path`, and records the
    /// identity and content annotations. `pod` carries its content-derived UID, as
    /// [`super::manifest::parse`] made it.
    pub fn resolve(&mut self, path: &Path, pod: &mut Pod) -> Decision {
        let content = pod.metadata.uid.clone().unwrap_or_default();
        let ident = identity(pod);
        let (uid, decision) = match self.assigned.get(path) {
            Some(a) if a.content == content => (a.uid.clone(), Decision::Kept),
            Some(a) if a.identity == ident => (a.uid.clone(), Decision::Kept),
            Some(_) => (content.clone(), Decision::Content),
            None => self.first_sight(pod, &content, &ident),
        };
        if decision != Decision::Kept {
            tracing::info!(file = %path.display(), %uid, ?decision, "static pod identity");
        }
        self.assigned.insert(
            path.to_path_buf(),
            Assigned { content: content.clone(), identity: ident.clone(), uid: uid.clone() },
        );
        pod.metadata.uid = Some(uid.clone());
        let annotations = pod.metadata.annotations.get_or_insert_with(Default::default);
        annotations.insert(keys::CONFIG_HASH.into(), uid);
        annotations.insert(keys::STATIC_IDENTITY.into(), ident);
        annotations.insert(keys::STATIC_CONTENT.into(), content);
        decision
    }

    fn first_sight(&mut self, pod: &Pod, content: &str, ident: &str) -> (String, Decision) {
        let full_name = crate::mirror::full_name(pod);
        let Some(running) = self.running.remove(&full_name) else {
            return (content.to_string(), Decision::Content);
        };
        if running.uid == content {
            return (content.to_string(), Decision::Content);
        }
        if running.identity.as_deref() == Some(ident) {
            let by = AdoptedBy::RecordedIdentity;
            return (running.uid, Decision::Adopted { by });
        }
        match running.matches(pod) {
            Ok(()) => (running.uid, Decision::Adopted { by: AdoptedBy::RuntimeConfig }),
            Err(mismatch) => {
                tracing::info!(
                    pod = %full_name,
                    running = %running.uid,
                    %mismatch,
                    "the running pod differs from its manifest: it is replaced"
                );
                (content.to_string(), Decision::Content)
            }
        }
    }

    /// Forgets manifests no longer in the directory (a file that comes back is a new pod).
    pub fn retain(&mut self, paths: impl Fn(&Path) -> bool) {
        self.assigned.retain(|p, _| paths(p));
    }
}

#[cfg(test)]
mod tests;
