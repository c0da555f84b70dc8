//! The apiserver source: pods bound to this node (`spec.nodeName=<node>`), watched through
//! kube-runtime's watcher and delivered to the mux as complete sets, as upstream's
//! `NewSourceApiserver`. The watcher resumes from its last resourceVersion after a broken
//! watch and relists after a 410; either way the mux sees the same pods by UID, so nothing is
//! recreated. Mirror pods are the kubelet's own reflections of static pods: never run, they
//! go to [`mirror`](crate::mirror) instead.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{Source, SourceSet};
use crate::mirror::{MirrorView, full_name, is_mirror};

#[derive(Debug)]
pub struct ApiSource {
    pub pods: Api<Pod>,
    pub node_name: String,
    /// Where the mirror pods bound here are published.
    pub mirrors: watch::Sender<MirrorView>,
}

/// The pods a set carries: everything bound here except mirror pods.
fn set(pods: &BTreeMap<String, Pod>) -> SourceSet {
    SourceSet {
        source: Source::Api,
        pods: pods.values().filter(|p| !is_mirror(p)).cloned().collect(),
    }
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

impl ApiSource {
    /// Watches until `stop`, sending the whole set after the initial list and after each change.
    pub async fn run(self, sets: mpsc::Sender<SourceSet>, stop: CancellationToken) {
        let config =
            watcher::Config::default().fields(&format!("spec.nodeName={}", self.node_name));
        let mut events = watcher(self.pods, config).default_backoff().boxed();
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        let mut relisting: Option<BTreeMap<String, Pod>> = None;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = events.next() => e,
            };
            let changed = match event {
                None => return,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching this node's pods; retrying with backoff");
                    false
                }
                Some(Ok(Event::Init)) => {
                    relisting = Some(BTreeMap::new());
                    false
                }
                Some(Ok(Event::InitApply(p))) => {
                    relisting.get_or_insert_with(BTreeMap::new).insert(uid(&p), p);
                    false
                }
                Some(Ok(Event::InitDone)) => {
                    pods = relisting.take().unwrap_or_default();
                    true
                }
                Some(Ok(Event::Apply(p))) => {
                    pods.insert(uid(&p), p);
                    true
                }
                Some(Ok(Event::Delete(p))) => pods.remove(&uid(&p)).is_some(),
            };
            if !changed {
                continue;
            }
            let mirrors: BTreeMap<String, Pod> =
                pods.values().filter(|p| is_mirror(p)).map(|p| (full_name(p), p.clone())).collect();
            self.mirrors.send_if_modified(|view| {
                let modified = view.as_ref() != Some(&mirrors);
                *view = Some(mirrors);
                modified
            });
            if sets.send(set(&pods)).await.is_err() {
                return;
            }
        }
    }
}
