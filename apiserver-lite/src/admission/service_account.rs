//! `ServiceAccount`, as upstream's plugin (pods, on create only): a pod without
//! `serviceAccountName` runs as `default`; the account must exist (the `default` one is looked
//! for a little longer, since the controller-manager makes it as a namespace appears); unless
//! `automountServiceAccountToken` is false (the pod's word wins over the account's), the pod
//! gets the projected volume `kube-api-access-<5 random>` (a token for the API, the cluster
//! CA from the `kube-root-ca.crt` ConfigMap, the namespace) mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container and init container
//! that has nothing mounted there; a pod without `imagePullSecrets` gets the account's. Mirror
//! pods are not changed, and may not name an account, secrets or token projections.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, Container, DownwardAPIProjection, DownwardAPIVolumeFile, EnvFromSource,
    EnvVar, KeyToPath, ObjectFieldSelector, Pod, ProjectedVolumeSource, ServiceAccount,
    ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};

use crate::serviceaccount::{
    DEFAULT_SERVICE_ACCOUNT, Objects, WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS,
};

/// Where the token, CA and namespace appear in containers.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The volume's name before its random suffix.
pub const VOLUME_PREFIX: &str = "kube-api-access-";
/// The ConfigMap every namespace has with the cluster's CA (`ca.crt`), published by the
/// controller-manager.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// How often a missing `default` account is looked for, and how long apart (upstream's 10
/// tries, 100–200 ms apart); other accounts are looked for once.
const DEFAULT_ACCOUNT_TRIES: usize = 10;

/// Why a pod is refused (upstream's words; the caller makes them a 403 about the pod).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "error looking up service account {namespace}/{name}: serviceaccount {name:?} not found"
    )]
    NoServiceAccount { namespace: String, name: String },
    #[error("a mirror pod may not reference service accounts")]
    MirrorServiceAccount,
    #[error("a mirror pod may not reference secrets")]
    MirrorSecrets,
    #[error("a mirror pod may not use ServiceAccountToken volume projections")]
    MirrorTokenProjection,
}

/// The projected volume every pod gets (upstream's `TokenVolumeSource`, defaulted).
pub fn token_volume_source() -> ProjectedVolumeSource {
    ProjectedVolumeSource {
        default_mode: Some(0o644),
        sources: Some(vec![
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    expiration_seconds: Some(WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS),
                    audience: None,
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: ROOT_CA_CONFIG_MAP.into(),
                    items: Some(vec![KeyToPath {
                        key: "ca.crt".into(),
                        path: "ca.crt".into(),
                        mode: None,
                    }]),
                    optional: None,
                }),
                ..Default::default()
            },
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![DownwardAPIVolumeFile {
                        path: "namespace".into(),
                        field_ref: Some(ObjectFieldSelector {
                            api_version: Some("v1".into()),
                            field_path: "metadata.namespace".into(),
                        }),
                        ..Default::default()
                    }]),
                }),
                ..Default::default()
            },
        ]),
    }
}

fn is_mirror(pod: &Pod) -> bool {
    pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(api::keys::CONFIG_MIRROR))
}

/// Upstream's `VisitPodSecretNames`: whether the pod names any Secret (pull secrets, env of
/// any container, secret, projected and CSI volumes).
fn references_secrets(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    let env_names_secret = |env: Option<&Vec<EnvVar>>, from: Option<&Vec<EnvFromSource>>| {
        env.into_iter()
            .flatten()
            .any(|e| e.value_from.as_ref().is_some_and(|v| v.secret_key_ref.is_some()))
            || from.into_iter().flatten().any(|e| e.secret_ref.is_some())
    };
    let in_containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c: &Container| env_names_secret(c.env.as_ref(), c.env_from.as_ref()));
    let in_ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .any(|c| env_names_secret(c.env.as_ref(), c.env_from.as_ref()));
    let in_volumes = spec.volumes.iter().flatten().any(|v| {
        v.secret.is_some()
            || v.csi.as_ref().is_some_and(|c| c.node_publish_secret_ref.is_some())
            || v.projected
                .as_ref()
                .is_some_and(|p| p.sources.iter().flatten().any(|s| s.secret.is_some()))
    });
    spec.image_pull_secrets.as_ref().is_some_and(|s| !s.is_empty())
        || in_containers
        || in_ephemeral
        || in_volumes
}

/// Upstream's `Validate` for mirror pods.
fn validate_mirror(pod: &Pod) -> Result<(), Refusal> {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.service_account_name.as_deref()).is_some_and(|n| !n.is_empty()) {
        return Err(Refusal::MirrorServiceAccount);
    }
    if references_secrets(pod) {
        return Err(Refusal::MirrorSecrets);
    }
    let token = spec.iter().flat_map(|s| s.volumes.iter().flatten()).any(|v| {
        v.projected
            .as_ref()
            .is_some_and(|p| p.sources.iter().flatten().any(|s| s.service_account_token.is_some()))
    });
    if token {
        return Err(Refusal::MirrorTokenProjection);
    }
    Ok(())
}

/// Looks the account up; a missing `default` a few more times (the controller-manager makes
/// it as the namespace appears).
async fn find(objects: &dyn Objects, namespace: &str, name: &str) -> Option<ServiceAccount> {
    let tries = if name == DEFAULT_SERVICE_ACCOUNT { DEFAULT_ACCOUNT_TRIES } else { 1 };
    let pause = Duration::from_millis(100 + rand::random_range(0..100));
    for attempt in 0..tries {
        if attempt > 0 {
            tokio::time::sleep(pause).await;
        }
        if let Some(sa) = objects.service_account(namespace, name) {
            return Some(sa);
        }
    }
    None
}

fn should_automount(sa: &ServiceAccount, pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.automount_service_account_token)
        .or(sa.automount_service_account_token)
        .unwrap_or(true)
}

/// Adds the token volume and the mounts; `suffix` makes the volume's name.
fn mount_token(pod: &mut Pod, suffix: &str) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    let existing = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with(VOLUME_PREFIX))
        .map(|v| v.name.clone());
    let name = existing.clone().unwrap_or_else(|| format!("{VOLUME_PREFIX}{suffix}"));
    let mount = VolumeMount {
        name: name.clone(),
        read_only: Some(true),
        mount_path: MOUNT_PATH.into(),
        ..Default::default()
    };
    let mut needed = false;
    let containers = spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut());
    for c in containers {
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts.iter().any(|m| m.mount_path == MOUNT_PATH) {
            mounts.push(mount.clone());
            needed = true;
        }
    }
    if existing.is_none() && needed {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name,
            projected: Some(token_volume_source()),
            ..Default::default()
        });
    }
}

/// The plugin on a pod being created in `namespace`; `suffix` is the volume name's random
/// part (five characters of upstream's name alphabet).
pub async fn admit(
    pod: &mut Pod,
    namespace: &str,
    objects: &dyn Objects,
    suffix: &str,
) -> Result<(), Refusal> {
    if is_mirror(pod) {
        return validate_mirror(pod);
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    let name = spec.service_account_name.get_or_insert_with(String::new);
    if name.is_empty() {
        *name = DEFAULT_SERVICE_ACCOUNT.into();
    }
    let name = name.clone();
    // The deprecated field mirrors the name, as upstream's conversion writes it.
    spec.service_account = Some(name.clone());
    let sa = find(objects, namespace, &name).await.ok_or_else(|| Refusal::NoServiceAccount {
        namespace: namespace.to_string(),
        name: name.clone(),
    })?;
    if should_automount(&sa, pod) {
        mount_token(pod, suffix);
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    if spec.image_pull_secrets.as_ref().is_none_or(Vec::is_empty)
        && let Some(secrets) = sa.image_pull_secrets.filter(|s| !s.is_empty())
    {
        spec.image_pull_secrets = Some(secrets);
    }
    Ok(())
}
