//! The watches against the apiserver: one kube-rs watcher per object, on its namespace with
//! `fieldSelector=metadata.name=<name>` (list, then watch from that version; relist after a
//! 410; errors retried with backoff), read as the object's state after each list and change.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use super::watch::ObjectWatcher;
use super::{Object, ObjectKey, ObjectKind};

/// Watches objects through the kubelet's apiserver client.
#[derive(Clone)]
pub struct ApiWatcher {
    pub client: kube::Client,
}

impl std::fmt::Debug for ApiWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiWatcher").finish_non_exhaustive()
    }
}

/// The states of one object from its watcher's events: after a list (`InitDone`), whatever it
/// found; after each change, the object or `None` once deleted.
fn states<K>(
    api: Api<K>,
    key: ObjectKey,
    wrap: fn(K) -> Object,
) -> BoxStream<'static, Option<Object>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name));
    let events = watcher(api, config).default_backoff().boxed();
    futures::stream::unfold((events, None::<Option<K>>), move |(mut events, mut listing)| {
        let key = key.clone();
        async move {
            loop {
                match events.next().await? {
                    Ok(Event::Init) => listing = Some(None),
                    Ok(Event::InitApply(o)) => listing = Some(Some(o)),
                    Ok(Event::InitDone) => {
                        let found = listing.take().flatten().map(wrap);
                        return Some((found, (events, None)));
                    }
                    Ok(Event::Apply(o)) => return Some((Some(wrap(o)), (events, listing))),
                    Ok(Event::Delete(_)) => return Some((None, (events, listing))),
                    Err(e) => {
                        tracing::warn!(object = %key, error = %e, "watching a referenced object; retrying with backoff");
                    }
                }
            }
        }
    })
    .boxed()
}

impl ObjectWatcher for ApiWatcher {
    fn watch(&self, key: &ObjectKey) -> BoxStream<'static, Option<Object>> {
        let client = self.client.clone();
        match key.kind {
            ObjectKind::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(client, &key.namespace);
                states(api, key.clone(), |o| Object::ConfigMap(Arc::new(o)))
            }
            ObjectKind::Secret => {
                let api: Api<Secret> = Api::namespaced(client, &key.namespace);
                states(api, key.clone(), |o| Object::Secret(Arc::new(o)))
            }
        }
    }
}
