//! The garbage collector's monitors, as upstream's `GraphBuilder.syncMonitors`: discovery lists
//! every kind the apiserver serves with list, watch and delete (events excepted, as upstream's
//! ignored resources); each gets a metadata watch feeding the graph. Discovery runs again every
//! [`REDISCOVERY`], so a kind served later is monitored too. [`run`] reports when the first
//! discovery's monitors have all listed (the collector's workers start after that, as
//! upstream's wait for `IsSynced`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::discovery::{ApiResource, Discovery, Scope, verbs};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatchEvent, watcher};
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::GarbageCollector;
use super::client::{GcClient, Resources};
use super::graph::{Event, ObjRef};

/// How often discovery is run again (upstream's `--garbage-collector` resync is 30 s).
pub const REDISCOVERY: Duration = Duration::from_secs(30);

/// Resources not monitored (upstream's default ignored resources).
fn ignored(ar: &ApiResource) -> bool {
    ar.plural == "events"
}

/// Runs discovery; records every version's kinds in `resources`; the resources to monitor.
pub async fn discover(
    client: &kube::Client,
    resources: &Resources,
) -> Result<Vec<ApiResource>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut monitor = Vec::new();
    for group in discovery.groups() {
        for v in group.versions() {
            for (ar, caps) in group.versioned_resources(v) {
                resources.insert(ar, caps.scope == Scope::Namespaced);
            }
        }
        for (ar, caps) in group.recommended_resources() {
            let ok = [verbs::LIST, verbs::WATCH, verbs::DELETE]
                .iter()
                .all(|v| caps.supports_operation(v));
            if ok && !ignored(&ar) && !ar.plural.contains('/') {
                monitor.push(ar);
            }
        }
    }
    Ok(monitor)
}

fn identity(ar: &ApiResource, obj: &DynamicObject) -> ObjRef {
    ObjRef {
        api_version: ar.api_version.clone(),
        kind: ar.kind.clone(),
        namespace: obj.namespace().unwrap_or_default(),
        name: obj.name_any(),
        uid: obj.uid().unwrap_or_default(),
    }
}

/// One kind's watch into the graph; `synced` once its first list is in.
async fn monitor<C: GcClient>(
    gc: Arc<GarbageCollector<C>>,
    api: Api<DynamicObject>,
    ar: ApiResource,
    synced: CancellationToken,
    stop: CancellationToken,
) {
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    // What this watch holds, so a relist reports what it no longer has as deleted.
    let mut known: HashMap<String, ObjRef> = HashMap::new();
    let mut relisting: Option<HashSet<String>> = None;
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            e = events.next() => e,
        };
        let Some(event) = event else { return };
        match event {
            Err(e) => {
                tracing::debug!(kind = %ar.kind, error = %e, "watching; retrying with backoff")
            }
            Ok(WatchEvent::Init) => relisting = Some(HashSet::new()),
            Ok(WatchEvent::InitApply(obj) | WatchEvent::Apply(obj)) => {
                let id = identity(&ar, &obj);
                if let Some(seen) = relisting.as_mut() {
                    seen.insert(id.uid.clone());
                }
                known.insert(id.uid.clone(), id.clone());
                gc.observe(Event::Upsert { identity: id, meta: Box::new(obj.metadata) });
            }
            Ok(WatchEvent::InitDone) => {
                let seen = relisting.take().unwrap_or_default();
                let gone: Vec<String> =
                    known.keys().filter(|u| !seen.contains(*u)).cloned().collect();
                for uid in gone {
                    if let Some(id) = known.remove(&uid) {
                        gc.observe(Event::Delete { identity: id });
                    }
                }
                synced.cancel();
            }
            Ok(WatchEvent::Delete(obj)) => {
                let id = identity(&ar, &obj);
                known.remove(&id.uid);
                gc.observe(Event::Delete { identity: id });
            }
        }
    }
}

/// Discovers and monitors until `stop`; cancels `synced` once the first discovery's monitors
/// have listed.
pub async fn run<C: GcClient>(
    gc: Arc<GarbageCollector<C>>,
    client: kube::Client,
    resources: Arc<Resources>,
    synced: CancellationToken,
    stop: CancellationToken,
) {
    let tasks = TaskTracker::new();
    let mut monitored: HashSet<(String, String)> = HashSet::new();
    let mut first = true;
    loop {
        match discover(&client, &resources).await {
            Ok(found) => {
                let mut tokens = Vec::new();
                for ar in found {
                    if !monitored.insert((ar.api_version.clone(), ar.kind.clone())) {
                        continue;
                    }
                    tracing::debug!(resource = %ar.plural, version = %ar.api_version, "monitoring");
                    let token = CancellationToken::new();
                    tokens.push(token.clone());
                    let api = Api::all_with(client.clone(), &ar);
                    tasks.spawn(monitor(gc.clone(), api, ar, token, stop.clone()));
                }
                if first {
                    first = false;
                    let (synced, stop) = (synced.clone(), stop.clone());
                    tasks.spawn(async move {
                        for t in tokens {
                            tokio::select! {
                                () = stop.cancelled() => return,
                                () = t.cancelled() => {}
                            }
                        }
                        tracing::info!("garbage collector: all monitors synced");
                        synced.cancel();
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "garbage collector discovery failed; retrying"),
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(if first { Duration::from_secs(1) } else { REDISCOVERY }) => {}
        }
    }
    tasks.close();
    tasks.wait().await;
}
