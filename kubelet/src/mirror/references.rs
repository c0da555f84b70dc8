//! What a mirror pod shows of its static pod's node-local ConfigMaps and Secrets.
//!
//! The apiserver refuses mirror pods that reference ConfigMaps or Secrets (upstream's
//! NodeRestriction; apiserver-lite's ServiceAccount admission for Secrets), and a static pod's
//! references name objects of the node's static config directory, not the API's. So the
//! mirror leaves them out, and says so: every volume with a `configMap` or `secret` source (or
//! a `projected` one with such a source), the containers' mounts of those volumes, and the
//! `env` and `envFrom` entries that read a ConfigMap or Secret are taken out of the mirror's
//! spec and recorded, as they are in the static pod, in the annotation
//! [`api::keys::STATIC_CONFIG`]:
//!
//! ```json
//! {"volumes": [<Volume>, ...],
//!  "containers": {"<name>": {"volumeMounts": [...], "env": [...], "envFrom": [...]}},
//!  "initContainers": {"<name>": {...}}}
//! ```
//!
//! Nothing else is changed, and nothing stands in for what was taken out (an `emptyDir` in a
//! secret's place would claim what is not there). The mirror's `config.mirror` is the static
//! pod's hash, as for every mirror, so this rewriting never makes the kubelet see its mirror as
//! outdated.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, EnvFromSource, EnvVar, PodSpec, Volume, VolumeMount};
use serde::Serialize;

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Taken {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    volume_mounts: Vec<VolumeMount>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    env: Vec<EnvVar>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    env_from: Vec<EnvFromSource>,
}

impl Taken {
    fn is_empty(&self) -> bool {
        self.volume_mounts.is_empty() && self.env.is_empty() && self.env_from.is_empty()
    }
}

/// What the mirror leaves out, as the annotation holds it.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    volumes: Vec<Volume>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    containers: BTreeMap<String, Taken>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    init_containers: BTreeMap<String, Taken>,
}

/// Whether a volume reads a ConfigMap or a Secret.
fn reads_objects(v: &Volume) -> bool {
    v.config_map.is_some()
        || v.secret.is_some()
        || v.projected.as_ref().is_some_and(|p| {
            p.sources.iter().flatten().any(|s| s.config_map.is_some() || s.secret.is_some())
        })
}

/// Takes `c`'s references to the taken volumes and to ConfigMaps and Secrets out of it.
fn take_from(c: &mut Container, volumes: &BTreeSet<String>) -> Taken {
    let mut taken = Taken::default();
    if let Some(mounts) = c.volume_mounts.as_mut() {
        let (out, keep) =
            std::mem::take(mounts).into_iter().partition(|m| volumes.contains(&m.name));
        (taken.volume_mounts, *mounts) = (out, keep);
    }
    if let Some(env) = c.env.as_mut() {
        let reads = |e: &EnvVar| {
            e.value_from
                .as_ref()
                .is_some_and(|f| f.config_map_key_ref.is_some() || f.secret_key_ref.is_some())
        };
        let (out, keep) = std::mem::take(env).into_iter().partition(reads);
        (taken.env, *env) = (out, keep);
    }
    if let Some(from) = c.env_from.as_mut() {
        let reads = |e: &EnvFromSource| e.config_map_ref.is_some() || e.secret_ref.is_some();
        let (out, keep) = std::mem::take(from).into_iter().partition(reads);
        (taken.env_from, *from) = (out, keep);
    }
    if c.volume_mounts.as_ref().is_some_and(Vec::is_empty) {
        c.volume_mounts = None;
    }
    if c.env.as_ref().is_some_and(Vec::is_empty) {
        c.env = None;
    }
    if c.env_from.as_ref().is_some_and(Vec::is_empty) {
        c.env_from = None;
    }
    taken
}

/// Takes the node-local references out of a mirror's spec; returns the annotation's value, or
/// `None` when the spec had none.
pub fn take_node_local(spec: &mut PodSpec) -> Option<String> {
    let mut record = Record::default();
    if let Some(volumes) = spec.volumes.as_mut() {
        let (out, keep) = std::mem::take(volumes).into_iter().partition(reads_objects);
        (record.volumes, *volumes) = (out, keep);
    }
    let names: BTreeSet<String> = record.volumes.iter().map(|v| v.name.clone()).collect();
    for c in spec.containers.iter_mut() {
        let taken = take_from(c, &names);
        if !taken.is_empty() {
            record.containers.insert(c.name.clone(), taken);
        }
    }
    for c in spec.init_containers.iter_mut().flatten() {
        let taken = take_from(c, &names);
        if !taken.is_empty() {
            record.init_containers.insert(c.name.clone(), taken);
        }
    }
    if record.volumes.is_empty()
        && record.containers.is_empty()
        && record.init_containers.is_empty()
    {
        return None;
    }
    serde_json::to_string(&record).ok()
}
