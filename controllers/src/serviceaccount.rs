//! The ServiceAccount controller, as upstream's `serviceaccounts-controller`: every active
//! namespace has a `default` ServiceAccount, created when the namespace appears and again if it
//! is deleted. A namespace that is terminating is left alone.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::client::{ApiError, Client};
use crate::informers::{Cache, Change, Informer};
use crate::key::Key;
use crate::workqueue::WorkQueue;

pub const NAME: &str = "serviceaccount";
/// The ServiceAccounts every namespace gets.
pub const SERVICE_ACCOUNTS: &[&str] = &["default"];

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("creating ServiceAccount {namespace}/{name}: {source}")]
    Create { namespace: String, name: String, source: ApiError },
}

pub struct ServiceAccountsController<C> {
    pub client: Arc<C>,
    pub namespaces: Arc<Cache<Namespace>>,
    pub service_accounts: Arc<Cache<ServiceAccount>>,
    /// Keys are namespaces (cluster-scoped: the name only).
    pub queue: Arc<WorkQueue<Key>>,
}

impl<C> std::fmt::Debug for ServiceAccountsController<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountsController").finish_non_exhaustive()
    }
}

impl<C: Client<ServiceAccount>> ServiceAccountsController<C> {
    pub fn register(
        self: &Arc<Self>,
        namespaces: &Informer<Namespace>,
        accounts: &Informer<ServiceAccount>,
    ) {
        let me = self.clone();
        namespaces.on_change(move |c| match c {
            Change::Added(ns) | Change::Updated { new: ns, .. } => {
                me.queue.add(Key::cluster(&ns.name_any()))
            }
            Change::Deleted(_) => {}
        });
        let me = self.clone();
        accounts.on_change(move |c| {
            if let Change::Deleted(sa) = c {
                me.queue.add(Key::cluster(&sa.namespace().unwrap_or_default()));
            }
        });
    }

    /// Upstream's `syncNamespace`.
    pub async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        let Some(ns) = self.namespaces.get("", &key.name) else { return Ok(()) };
        let phase = ns.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Active");
        if phase != "Active" || ns.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        for name in SERVICE_ACCOUNTS {
            if self.service_accounts.get(&key.name, name).is_some() {
                continue;
            }
            let sa = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some((*name).to_string()),
                    namespace: Some(key.name.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match self.client.create(&sa).await {
                Ok(_) => tracing::info!(namespace = %key.name, name, "created ServiceAccount"),
                Err(e) if e.is_already_exists() => {}
                // The namespace went away or is terminating meanwhile.
                Err(e) if e.is_not_found() => {}
                Err(ApiError::Rejected { .. }) if self.terminating(&key.name) => {}
                Err(source) => {
                    return Err(SyncError::Create {
                        namespace: key.name.clone(),
                        name: (*name).to_string(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    fn terminating(&self, ns: &str) -> bool {
        self.namespaces.get("", ns).is_none_or(|n| {
            n.metadata.deletion_timestamp.is_some()
                || n.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
        })
    }
}

impl<C: Client<ServiceAccount>> crate::worker::Reconcile for ServiceAccountsController<C> {
    type Error = SyncError;
    async fn sync(&self, key: &Key) -> Result<(), SyncError> {
        ServiceAccountsController::sync(self, key).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::NamespaceStatus;

    use super::*;
    use crate::fake::FakeApi;
    use crate::metrics::QueueMetrics;

    fn namespace(name: &str, phase: &str) -> Namespace {
        Namespace {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(NamespaceStatus { phase: Some(phase.into()), ..Default::default() }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn every_active_namespace_gets_a_default_service_account_again_after_deletion() {
        let api = Arc::new(FakeApi::default());
        let (ns_informer, sa_informer) = (Informer::default(), Informer::default());
        let ctrl = Arc::new(ServiceAccountsController {
            client: api.clone(),
            namespaces: ns_informer.cache(),
            service_accounts: sa_informer.cache(),
            queue: WorkQueue::new(NAME, QueueMetrics::default()),
        });
        ctrl.register(&ns_informer, &sa_informer);
        api.put(&namespace("team-a", "Active"));
        api.put(&namespace("leaving", "Terminating"));
        api.deliver(&ns_informer);
        api.deliver(&sa_informer);
        assert_eq!(ctrl.queue.queued(), [Key::cluster("leaving"), Key::cluster("team-a")]);
        for key in ctrl.queue.queued() {
            ctrl.sync(&key).await.unwrap();
        }
        let accounts: Vec<String> = api
            .list::<ServiceAccount>()
            .iter()
            .map(|s| format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any()))
            .collect();
        assert_eq!(accounts, ["team-a/default"]);

        api.deliver(&sa_informer);
        api.take_actions();
        ctrl.sync(&Key::cluster("team-a")).await.unwrap();
        assert!(api.take_actions().is_empty(), "already there: no call");

        api.remove::<ServiceAccount>("team-a", "default");
        api.deliver(&sa_informer);
        assert!(ctrl.queue.queued().contains(&Key::cluster("team-a")));
        ctrl.sync(&Key::cluster("team-a")).await.unwrap();
        assert_eq!(api.list::<ServiceAccount>().len(), 1, "recreated");
        ctrl.sync(&Key::cluster("missing")).await.unwrap();
    }
}
