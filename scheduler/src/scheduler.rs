//! The wiring: start the informers, wait until their first lists are in the cache (upstream's
//! `WaitForCacheSync`), then schedule, as the lease holder when leader election is on. Every
//! task is owned here and stopped in order: the scheduling loop (draining bindings in flight),
//! then the event writer, then the informers, and the lease is released last.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::runtime::reflector;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::binder::ApiBinder;
use crate::cache::Cache;
use crate::events::{self, Reporter};
use crate::informers::{self, Targets};
use crate::queue::SchedulingQueue;
use crate::schedule_one::{Options, Scheduler};
use leaderelection::{ElectionConfig, LeaderElector, LeaderError};

/// Reports queued for the event writer at most.
const REPORT_QUEUE: usize = 4096;
/// How long the event writer may take to flush on stop.
const EVENTS_FLUSH: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct Config {
    /// `default-scheduler`: the pods (`spec.schedulerName`) this scheduler takes.
    pub scheduler_name: String,
    /// `None`: `--leader-elect=false`.
    pub leader_election: Option<ElectionConfig>,
    /// Names this instance in events (`reportingInstance`); the lease identity when electing.
    pub instance: String,
    pub options: Options,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    LeaderElection(#[from] LeaderError),
}

/// Runs until `stop`; an error means leadership was lost (the process should exit, as
/// upstream's does, so a restart rejoins the election with a clean cache).
pub async fn run(
    client: kube::Client,
    config: Config,
    stop: CancellationToken,
) -> Result<(), RunError> {
    let cache = Arc::new(Mutex::new(Cache::default()));
    let queue = Arc::new(SchedulingQueue::default());
    let targets = Targets {
        cache: cache.clone(),
        queue: queue.clone(),
        scheduler_name: config.scheduler_name.clone(),
    };
    let tracker = TaskTracker::new();

    let informers_stop = CancellationToken::new();
    let (pods_synced, nodes_synced) = (CancellationToken::new(), CancellationToken::new());
    let (pod_store, pod_writer) = reflector::store::<Pod>();
    let (_node_store, node_writer) = reflector::store::<Node>();
    tracker.spawn(informers::run_pods(
        Api::all(client.clone()),
        pod_writer,
        targets.clone(),
        pods_synced.clone(),
        informers_stop.clone(),
    ));
    tracker.spawn(informers::run_nodes(
        Api::all(client.clone()),
        node_writer,
        targets,
        nodes_synced.clone(),
        informers_stop.clone(),
    ));
    let events_stop = CancellationToken::new();
    let (reporter, reports) = Reporter::channel(REPORT_QUEUE);
    tracker.spawn(events::run(
        client.clone(),
        reports,
        config.instance.clone(),
        events_stop.clone(),
    ));

    let synced = async {
        pods_synced.cancelled().await;
        nodes_synced.cancelled().await;
    };
    let mut result = Ok(());
    let ready = tokio::select! {
        () = stop.cancelled() => false,
        () = synced => true,
    };
    if ready {
        tracing::info!(nodes = cache.lock().map(|c| c.node_count()).unwrap_or(0), "caches synced");
        let mut scheduler = Scheduler::new(
            cache,
            queue,
            Arc::new(ApiBinder { client: client.clone() }),
            reporter,
            config.options,
        );
        scheduler.pods = Some(pod_store);
        match config.leader_election {
            None => scheduler.run(stop.clone()).await,
            Some(election) => {
                let mut elector = LeaderElector::new(client, election);
                if elector.acquire(&stop).await {
                    let leading = stop.child_token();
                    let work = tracker.spawn(scheduler.run(leading.clone()));
                    let kept = elector.keep(&stop).await;
                    leading.cancel();
                    match kept {
                        Ok(()) => {
                            let _ = work.await;
                            elector.release().await;
                        }
                        // Lost: stop at once, without waiting for bindings in flight.
                        Err(e) => {
                            result = Err(e.into());
                            events_stop.cancel();
                        }
                    }
                }
            }
        }
    } else {
        drop(reporter);
    }
    informers_stop.cancel();
    tracker.close();
    if tokio::time::timeout(EVENTS_FLUSH, tracker.wait()).await.is_err() {
        events_stop.cancel();
        tracker.wait().await;
    }
    result
}
