//! The root CA publisher, as upstream's `root-ca-certificate-publisher-controller`: every
//! namespace has the ConfigMap `kube-root-ca.crt` whose `ca.crt` is the CA that verifies the
//! apiserver (`--root-ca-file`, else the CA of the manager's own kubeconfig), with upstream's
//! description annotation. It is made when a namespace appears, made again when deleted, and
//! put back when edited. Pods' service-account volumes read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::client::{ApiError, Client};
use crate::informers::{Cache, Change, Informer};
use crate::key::Key;
use crate::workqueue::WorkQueue;

pub const NAME: &str = "root_ca_cert_publisher";
/// The ConfigMap every namespace gets.
pub const CONFIG_MAP: &str = "kube-root-ca.crt";
/// Its key holding the CA bundle.
pub const KEY: &str = "ca.crt";
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("publishing ConfigMap {namespace}/kube-root-ca.crt: {source}")]
    Write { namespace: String, source: ApiError },
}

pub struct Publisher<C> {
    pub client: Arc<C>,
    pub namespaces: Arc<Cache<Namespace>>,
    pub config_maps: Arc<Cache<ConfigMap>>,
    /// The CA bundle (PEM).
    pub root_ca: String,
    /// Keys are namespaces (cluster-scoped: the name only).
    pub queue: Arc<WorkQueue<Key>>,
}

impl<C> std::fmt::Debug for Publisher<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher").finish_non_exhaustive()
    }
}

impl<C: Client<ConfigMap>> Publisher<C> {
    /// Upstream's handlers: a namespace added (or updated while Active), our ConfigMap updated
    /// or deleted.
    pub fn register(
        self: &Arc<Self>,
        namespaces: &Informer<Namespace>,
        maps: &Informer<ConfigMap>,
    ) {
        let me = self.clone();
        namespaces.on_change(move |c| match c {
            Change::Added(ns) => me.queue.add(Key::cluster(&ns.name_any())),
            Change::Updated { new, .. } => {
                let phase = new.status.as_ref().and_then(|s| s.phase.as_deref());
                if phase.unwrap_or("Active") == "Active" {
                    me.queue.add(Key::cluster(&new.name_any()));
                }
            }
            Change::Deleted(_) => {}
        });
        let me = self.clone();
        maps.on_change(move |c| {
            let cm = match c {
                Change::Updated { new, .. } => new,
                Change::Deleted(cm) => cm,
                Change::Added(_) => return,
            };
            if cm.name_any() == CONFIG_MAP {
                me.queue.add(Key::cluster(&cm.namespace().unwrap_or_default()));
            }
        });
    }

    fn terminating(&self, ns: &str) -> bool {
        self.namespaces.get("", ns).is_none_or(|n| {
            n.metadata.deletion_timestamp.is_some()
                || n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
        })
    }

    fn data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(KEY.to_string(), self.root_ca.clone())])
    }

    /// Upstream's `syncNamespace`.
    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let ns = &key.name;
        let err = |source| SyncError::Write { namespace: ns.clone(), source };
        let Some(cm) = self.config_maps.get(ns, CONFIG_MAP) else {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(CONFIG_MAP.into()),
                    namespace: Some(ns.clone()),
                    annotations: Some(BTreeMap::from([(
                        DESCRIPTION_ANNOTATION.to_string(),
                        DESCRIPTION.to_string(),
                    )])),
                    ..Default::default()
                },
                data: Some(self.data()),
                ..Default::default()
            };
            return match self.client.create(&cm).await {
                Ok(_) => {
                    tracing::info!(namespace = %ns, "published kube-root-ca.crt");
                    Ok(())
                }
                // The namespace is gone or terminating: nothing to publish (upstream does not
                // retry these either).
                Err(e) if e.is_not_found() || e.is_already_exists() => Ok(()),
                Err(ApiError::Rejected { .. }) if self.terminating(ns) => Ok(()),
                Err(e) => Err(err(e)),
            };
        };
        let described = cm.annotations().get(DESCRIPTION_ANNOTATION).is_some_and(|d| !d.is_empty());
        if cm.data.as_ref() == Some(&self.data()) && described {
            return Ok(());
        }
        let mut cm = (*cm).clone();
        cm.data = Some(self.data());
        cm.annotations_mut().insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
        self.client.replace(&cm).await.map(|_| ()).map_err(err)
    }
}

impl<C: Client<ConfigMap>> crate::worker::Reconcile for Publisher<C> {
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        Publisher::sync(self, key).await
    }
}

/// DER certificates as a PEM bundle (the kubeconfig's CA as kube-rs holds it).
pub fn pem_bundle(ders: &[Vec<u8>]) -> String {
    use base64::Engine;
    let mut out = String::new();
    for der in ders {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::NamespaceStatus;

    use super::*;
    use crate::fake::FakeApi;
    use crate::metrics::QueueMetrics;

    fn namespace(name: &str) -> Namespace {
        Namespace {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(NamespaceStatus { phase: Some("Active".into()), ..Default::default() }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn every_namespace_gets_the_ca_again_after_deletion_or_edits() {
        let api = Arc::new(FakeApi::default());
        let (ns_informer, cm_informer) = (Informer::default(), Informer::default());
        let ctrl = Arc::new(Publisher {
            client: api.clone(),
            namespaces: ns_informer.cache(),
            config_maps: cm_informer.cache(),
            root_ca: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n".into(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
        });
        ctrl.register(&ns_informer, &cm_informer);
        api.put(&namespace("team-a"));
        api.deliver(&ns_informer);
        api.deliver(&cm_informer);
        assert_eq!(ctrl.queue.queued(), [Key::cluster("team-a")]);
        ctrl.sync(&Key::cluster("team-a")).await.unwrap();
        let cm = api.object::<ConfigMap>("team-a", CONFIG_MAP).unwrap();
        assert_eq!(cm.data.unwrap()[KEY], ctrl.root_ca);
        assert_eq!(cm.metadata.annotations.unwrap()[DESCRIPTION_ANNOTATION], DESCRIPTION);

        api.deliver(&cm_informer);
        api.take_actions();
        ctrl.sync(&Key::cluster("team-a")).await.unwrap();
        assert!(api.take_actions().is_empty(), "as it should be: no call");

        api.edit::<ConfigMap>("team-a", CONFIG_MAP, |cm| {
            cm.data = Some(BTreeMap::from([(KEY.to_string(), "tampered".to_string())]));
        });
        api.deliver(&cm_informer);
        assert!(ctrl.queue.queued().contains(&Key::cluster("team-a")));
        ctrl.sync(&Key::cluster("team-a")).await.unwrap();
        assert_eq!(
            api.object::<ConfigMap>("team-a", CONFIG_MAP).unwrap().data.unwrap()[KEY],
            ctrl.root_ca
        );

        api.remove::<ConfigMap>("team-a", CONFIG_MAP);
        api.deliver(&cm_informer);
        ctrl.sync(&Key::cluster("team-a")).await.unwrap();
        assert!(api.object::<ConfigMap>("team-a", CONFIG_MAP).is_some(), "made again");
    }

    #[test]
    fn der_certificates_become_a_pem_bundle() {
        let pem = pem_bundle(&[vec![1; 50], vec![2; 3]]);
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 2);
        assert!(pem.lines().all(|l| l.len() <= 64));
    }
}
