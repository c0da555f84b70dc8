//! `projected` volumes: ConfigMap, Secret, downward API and service account token sources in
//! one directory, on a tmpfs of the volume's own (upstream's projected plugin wraps a
//! memory-backed emptyDir). Two sources writing one path are an error naming it. A token is
//! requested for the pod's service account, bound to the pod, through the
//! [`TokenManager`](crate::token::TokenManager), which refreshes it; each sync writes the
//! current one.

use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, ProjectedVolumeSource, ServiceAccountTokenProjection};

use super::atomic_writer::{self, FileProjection, Payload};
use super::payload::{DEFAULT_MODE, insert, item_path, mode};
use super::{SetupError, VolumeManager, config_map, downward_api, ensure_dir, memory_size, secret};
use crate::config::Source;
use crate::token::{TokenError, TokenRequest, TokenSource};

/// A token source's default lifetime (upstream's API default for `expirationSeconds`).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

async fn token(
    vm: &VolumeManager,
    pod: &Pod,
    source: &ServiceAccountTokenProjection,
) -> Result<String, SetupError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    if crate::status::manager::source_of(pod).is_some_and(Source::is_static) {
        return Err(TokenError::StaticPod { namespace, pod: pod_name }.into());
    }
    let Some(tokens) = &vm.tokens else {
        return Err(TokenError::NoApiServer { namespace, pod: pod_name }.into());
    };
    let spec = pod.spec.as_ref();
    let request = TokenRequest {
        namespace,
        service_account: spec
            .and_then(|s| s.service_account_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".into()),
        audiences: source.audience.iter().filter(|a| !a.is_empty()).cloned().collect(),
        expiration_seconds: source.expiration_seconds.unwrap_or(DEFAULT_EXPIRATION_SECONDS),
        pod_name,
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
    };
    Ok(tokens.token(&request).await?.token)
}

/// Every source's files, in one payload.
pub async fn payload(
    vm: &VolumeManager,
    pod: &Pod,
    source: &ProjectedVolumeSource,
) -> Result<Payload, SetupError> {
    let default_mode = mode(source.default_mode, DEFAULT_MODE, "defaultMode")?;
    let mut files = Payload::new();
    for s in source.sources.iter().flatten() {
        let part = if let Some(cm) = &s.config_map {
            let optional = cm.optional.unwrap_or(false);
            let items = cm.items.as_deref();
            config_map::payload(vm, pod, &cm.name, items, optional, default_mode).await?
        } else if let Some(sec) = &s.secret {
            let optional = sec.optional.unwrap_or(false);
            let items = sec.items.as_deref();
            secret::payload(vm, pod, &sec.name, items, optional, default_mode).await?
        } else if let Some(d) = &s.downward_api {
            let items = d.items.as_deref().unwrap_or_default();
            downward_api::payload(pod, items, default_mode, vm.allocatable)?
        } else if let Some(t) = &s.service_account_token {
            let path = item_path(&t.path)?;
            let data = token(vm, pod, t).await?.into_bytes();
            Payload::from([(path, FileProjection { data, mode: default_mode })])
        } else if s.cluster_trust_bundle.is_some() {
            return Err(SetupError::UnsupportedProjection("clusterTrustBundle"));
        } else if s.pod_certificate.is_some() {
            return Err(SetupError::UnsupportedProjection("podCertificate"));
        } else {
            continue;
        };
        for (path, file) in part {
            insert(&mut files, path, file)?;
        }
    }
    Ok(files)
}

/// Mounts the volume's tmpfs at `dir` (once) and writes every source into it.
pub async fn setup(
    vm: &VolumeManager,
    pod: &Pod,
    source: &ProjectedVolumeSource,
    dir: &Path,
) -> Result<(), SetupError> {
    let files = payload(vm, pod, source).await?;
    ensure_dir(dir, 0o777)?;
    vm.ensure_tmpfs(dir, memory_size(pod, None, vm.allocatable))?;
    atomic_writer::write(dir, &files, super::ownership::fs_group(pod))?;
    Ok(())
}
