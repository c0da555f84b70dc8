//! What a pod and a persistent volume name, as upstream's `podutil.VisitPodSecretNames`,
//! `VisitPodConfigmapNames` and `pvutil.VisitPVSecretNames` read them: the graph's edges come
//! from here, and NodeRestriction refuses mirror pods that name anything. Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, EnvFromSource, EnvVar, PersistentVolume, Pod};

/// The API objects a pod names, each in the pod's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodReferences {
    /// Image pull secrets, env and envFrom of every container (init and ephemeral ones too),
    /// secret volumes, projected secrets and the volume plugins' secret references.
    pub secrets: BTreeSet<String>,
    /// Env and envFrom of every container, configMap volumes, projected configMaps.
    pub config_maps: BTreeSet<String>,
    /// `spec.serviceAccountName` (or the deprecated `spec.serviceAccount`).
    pub service_account: Option<String>,
    /// `persistentVolumeClaim` volumes, and the claims `ephemeral` volumes make
    /// (`<pod>-<volume>`).
    pub claims: BTreeSet<String>,
    /// `spec.resourceClaims`: named claims, and those made from templates once the pod's
    /// status names them.
    pub resource_claims: BTreeSet<String>,
}

impl PodReferences {
    /// Whether the pod names no other API object.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
            && self.config_maps.is_empty()
            && self.service_account.is_none()
            && self.claims.is_empty()
            && self.resource_claims.is_empty()
    }
}

fn add(set: &mut BTreeSet<String>, name: &str) {
    if !name.is_empty() {
        set.insert(name.to_string());
    }
}

fn env_refs(
    env: Option<&Vec<EnvVar>>,
    env_from: Option<&Vec<EnvFromSource>>,
    r: &mut PodReferences,
) {
    for from in env_from.into_iter().flatten() {
        if let Some(s) = &from.secret_ref {
            add(&mut r.secrets, &s.name);
        }
        if let Some(c) = &from.config_map_ref {
            add(&mut r.config_maps, &c.name);
        }
    }
    for source in env.into_iter().flatten().filter_map(|e| e.value_from.as_ref()) {
        if let Some(s) = &source.secret_key_ref {
            add(&mut r.secrets, &s.name);
        }
        if let Some(c) = &source.config_map_key_ref {
            add(&mut r.config_maps, &c.name);
        }
    }
}

/// Everything `pod` names.
pub fn of_pod(pod: &Pod) -> PodReferences {
    let mut r = PodReferences::default();
    let Some(spec) = &pod.spec else { return r };
    for s in spec.image_pull_secrets.iter().flatten() {
        add(&mut r.secrets, &s.name);
    }
    let containers: Vec<&Container> =
        spec.init_containers.iter().flatten().chain(&spec.containers).collect();
    for c in containers {
        env_refs(c.env.as_ref(), c.env_from.as_ref(), &mut r);
    }
    for c in spec.ephemeral_containers.iter().flatten() {
        env_refs(c.env.as_ref(), c.env_from.as_ref(), &mut r);
    }
    // The deprecated `serviceAccount` is what conversion copies into the name when only it is set.
    r.service_account = [&spec.service_account_name, &spec.service_account]
        .into_iter()
        .find_map(|n| n.clone().filter(|n| !n.is_empty()));
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    for v in spec.volumes.iter().flatten() {
        if let Some(s) = &v.secret {
            add(&mut r.secrets, s.secret_name.as_deref().unwrap_or_default());
        }
        if let Some(c) = &v.config_map {
            add(&mut r.config_maps, &c.name);
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(s) = &source.secret {
                add(&mut r.secrets, &s.name);
            }
            if let Some(c) = &source.config_map {
                add(&mut r.config_maps, &c.name);
            }
        }
        let plugin_secrets = [
            v.azure_file.as_ref().map(|a| a.secret_name.as_str()),
            v.cephfs.as_ref().and_then(|c| c.secret_ref.as_ref()).map(|s| s.name.as_str()),
            v.cinder.as_ref().and_then(|c| c.secret_ref.as_ref()).map(|s| s.name.as_str()),
            v.flex_volume.as_ref().and_then(|f| f.secret_ref.as_ref()).map(|s| s.name.as_str()),
            v.rbd.as_ref().and_then(|b| b.secret_ref.as_ref()).map(|s| s.name.as_str()),
            v.scale_io.as_ref().map(|s| s.secret_ref.name.as_str()),
            v.iscsi.as_ref().and_then(|i| i.secret_ref.as_ref()).map(|s| s.name.as_str()),
            v.storageos.as_ref().and_then(|o| o.secret_ref.as_ref()).map(|s| s.name.as_str()),
            v.csi
                .as_ref()
                .and_then(|c| c.node_publish_secret_ref.as_ref())
                .map(|s| s.name.as_str()),
        ];
        for name in plugin_secrets.into_iter().flatten() {
            add(&mut r.secrets, name);
        }
        if let Some(c) = &v.persistent_volume_claim {
            add(&mut r.claims, &c.claim_name);
        }
        if v.ephemeral.is_some() && !pod_name.is_empty() {
            add(&mut r.claims, &format!("{pod_name}-{}", v.name));
        }
    }
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    for claim in spec.resource_claims.iter().flatten() {
        let made =
            || statuses?.iter().find(|s| s.name == claim.name)?.resource_claim_name.as_deref();
        if let Some(name) = claim.resource_claim_name.as_deref().or_else(made) {
            add(&mut r.resource_claims, name);
        }
    }
    r
}

/// A persistent volume bound to a claim: the claim, and the Secrets (namespace, name) it
/// hands the kubelet (upstream's kubelet-visible ones; CSI controller secrets are not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PvReferences {
    pub claim: (String, String),
    pub secrets: BTreeSet<(String, String)>,
}

/// What `pv` names, or `None` while it is bound to no claim (it grants nothing then).
pub fn of_pv(pv: &PersistentVolume) -> Option<PvReferences> {
    let spec = pv.spec.as_ref()?;
    let claim = spec.claim_ref.as_ref()?;
    let claim_ns = claim.namespace.clone().unwrap_or_default();
    let claim_name = claim.name.clone().filter(|n| !n.is_empty())?;
    let mut secrets = BTreeSet::new();
    // A reference without a namespace means the claim's (upstream's compatibility rule).
    let mut add = |ns: Option<&String>, name: Option<&String>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            let ns = ns.filter(|n| !n.is_empty()).unwrap_or(&claim_ns);
            secrets.insert((ns.clone(), name.clone()));
        }
    };
    if let Some(a) = &spec.azure_file {
        add(a.secret_namespace.as_ref(), Some(&a.secret_name));
    }
    let refs = [
        spec.cephfs.as_ref().and_then(|c| c.secret_ref.as_ref()),
        spec.cinder.as_ref().and_then(|c| c.secret_ref.as_ref()),
        spec.flex_volume.as_ref().and_then(|f| f.secret_ref.as_ref()),
        spec.rbd.as_ref().and_then(|b| b.secret_ref.as_ref()),
        spec.scale_io.as_ref().map(|s| &s.secret_ref),
        spec.iscsi.as_ref().and_then(|i| i.secret_ref.as_ref()),
    ];
    for s in refs.into_iter().flatten() {
        add(s.namespace.as_ref(), s.name.as_ref());
    }
    if let Some(s) = spec.storageos.as_ref().and_then(|o| o.secret_ref.as_ref()) {
        add(s.namespace.as_ref(), s.name.as_ref());
    }
    if let Some(csi) = &spec.csi {
        for s in
            [&csi.node_publish_secret_ref, &csi.node_stage_secret_ref, &csi.node_expand_secret_ref]
                .into_iter()
                .flatten()
        {
            add(s.namespace.as_ref(), s.name.as_ref());
        }
    }
    Some(PvReferences { claim: (claim_ns, claim_name), secrets })
}
