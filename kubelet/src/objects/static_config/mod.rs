//! Node-local ConfigMaps and Secrets for static pods: the files of `staticConfigPath` (default
//! `/etc/kubernetes/static-config`), served to static pods through a second
//! [`ObjectManager`](super::ObjectManager), with or without an apiserver. Static pods reference
//! them by name, in their own namespace, as API pods reference API objects (volumes, projected
//! sources, `env`, `envFrom`); API pods never see them.
//!
//! - [`file`]: one file → its objects (validated as the apiserver validates them; a file
//!   holding a Secret must be root-only).
//! - [`dir`]: the directory's state (the rules of [`crate::config::dir`], shared with the
//!   static pod source), what it serves, and the per-file report.
//! - [`StaticConfigSource`]: the watch ([`crate::config::dir_watch`]) that reads the directory
//!   and publishes to [`StaticConfigObjects`], which wakes exactly the pods that reference an
//!   object that changed (the same `ObjectsChanged` path API objects take).

pub mod dir;
pub mod file;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::watch::{Changes, SYNC_WAIT};
use super::{Object, ObjectError, ObjectKey, ObjectManager, references};
use crate::config::dir::ManifestReport;
use crate::config::dir_watch::DirWatch;
use crate::events::Recorder;
use dir::{Published, StaticConfigDir};
use file::Owners;

#[derive(Debug, Default)]
struct Inner {
    published: Published,
    by_pod: HashMap<String, BTreeSet<ObjectKey>>,
}

/// The objects of the static config directory, as last read.
#[derive(Debug)]
pub struct StaticConfigObjects {
    inner: Mutex<Inner>,
    /// Whether the directory has been read once.
    loaded: watch::Sender<bool>,
    changes: Changes,
}

impl StaticConfigObjects {
    pub fn new(changes: Changes) -> Self {
        Self { inner: Mutex::default(), loaded: watch::Sender::new(false), changes }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves `published` from now on; the pods that reference an object that appeared,
    /// changed, went, or became unavailable are synced again.
    pub fn publish(&self, published: Published) {
        let pods: Vec<String> = {
            let mut inner = self.inner();
            let old = std::mem::replace(&mut inner.published, published);
            let new = &inner.published;
            let keys = old.objects.keys().chain(new.objects.keys());
            let keys = keys.chain(old.unavailable.keys()).chain(new.unavailable.keys());
            let changed: BTreeSet<&ObjectKey> = keys
                .filter(|k| {
                    old.objects.get(*k) != new.objects.get(*k)
                        || old.unavailable.get(*k) != new.unavailable.get(*k)
                })
                .collect();
            inner
                .by_pod
                .iter()
                .filter(|(_, refs)| refs.iter().any(|k| changed.contains(k)))
                .map(|(uid, _)| uid.clone())
                .collect()
        };
        self.loaded.send_if_modified(|loaded| !std::mem::replace(loaded, true));
        if !pods.is_empty() {
            tracing::debug!(?pods, "a node-local object changed");
            let _ = self.changes.send(pods);
        }
    }
}

impl ObjectManager for StaticConfigObjects {
    fn register_pod(&self, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let refs = references(pod);
        let mut inner = self.inner();
        if refs.is_empty() {
            inner.by_pod.remove(&uid);
        } else {
            inner.by_pod.insert(uid, refs);
        }
    }

    fn unregister_pod(&self, uid: &str) {
        self.inner().by_pod.remove(uid);
    }

    fn get<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Object, ObjectError>> {
        Box::pin(async move {
            let mut loaded = self.loaded.subscribe();
            if tokio::time::timeout(SYNC_WAIT, loaded.wait_for(|l| *l)).await.is_err() {
                return Err(ObjectError::NotSynced(key.clone()));
            }
            let inner = self.inner();
            if let Some(object) = inner.published.objects.get(key) {
                return Ok(object.clone());
            }
            match inner.published.unavailable.get(key) {
                Some(reason) => {
                    Err(ObjectError::StaticConfig { object: key.clone(), reason: reason.clone() })
                }
                None => Err(ObjectError::NotFound(key.clone())),
            }
        })
    }
}

/// Reads the static config directory (inotify and a rescan every `period`) and publishes what
/// it serves, until `stop`.
#[derive(Debug)]
pub struct StaticConfigSource {
    pub dir: PathBuf,
    pub period: Duration,
    pub recorder: Recorder,
}

impl StaticConfigSource {
    pub async fn run(
        self,
        objects: Arc<StaticConfigObjects>,
        report: watch::Sender<Vec<ManifestReport>>,
        stop: CancellationToken,
    ) {
        let owners = Owners { kubelet_uid: nix::unistd::geteuid().as_raw() };
        let mut watch = DirWatch::new(self.dir.clone(), self.period, dir::REASONS.what);
        let mut state = StaticConfigDir::new(self.dir, self.recorder, owners);
        while let Some(batch) = watch.next(&stop).await {
            state.apply(batch);
            let (published, reports) = state.desired();
            report.send_if_modified(|r| {
                let changed = *r != reports;
                *r = reports;
                changed
            });
            objects.publish(published);
        }
    }
}
