//! The wiring, as upstream's `cmd/kube-controller-manager/app`: serve `/healthz` and `/metrics`
//! at once; then, as the holder of the lease when `--leader-elect`, build the shared informers,
//! start every enabled controller (the [`CONTROLLERS`] table; `--controllers` picks), start the
//! informers, wait for their caches, and run the controllers' workers.
//!
//! Stop order, all here: on `stop` the controllers' workers finish their current sync, then the
//! informers stop, the event writer gets a moment to flush, the lease is released and the
//! secure port closes. A leader that cannot renew its lease stops its controllers at once
//! (without waiting) and [`run`] returns [`RunError::LeaderElectionLost`], so the process exits
//! as upstream's does.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ServiceAccount};
use leaderelection::{ElectionConfig, LeaderElector, LeaderError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::KubeClient;
use crate::client_builder::{ClientBuilder, CredentialsError};
use crate::clock::SystemClock;
use crate::events::Recorder;
use crate::expectations::Expectations;
use crate::informers::Informers;
use crate::metrics::Metrics;
use crate::server::{SecureServer, ServeError, Serving};
use crate::workqueue::WorkQueue;
use crate::{
    cronjob, daemon, deployment, gc, job, nodelifecycle, podgc, replicaset, rootcacertpublisher,
    serviceaccount, tainteviction, ttl_after_finished, worker,
};

/// How long the event writers may take to flush on stop.
const EVENTS_FLUSH: Duration = Duration::from_secs(5);

/// What `main` hands over (upstream's flags).
#[derive(Debug, Clone)]
pub struct Config {
    /// `--controllers`: `*`, `name`, `-name`.
    pub controllers: Vec<String>,
    pub leader_election: Option<ElectionConfig>,
    pub concurrent_replicaset_syncs: usize,
    pub concurrent_deployment_syncs: usize,
    pub concurrent_serviceaccount_syncs: usize,
    pub concurrent_job_syncs: usize,
    pub concurrent_cron_job_syncs: usize,
    pub concurrent_ttl_after_finished_syncs: usize,
    pub concurrent_gc_syncs: usize,
    /// `--enable-garbage-collector`.
    pub enable_garbage_collector: bool,
    pub concurrent_daemonset_syncs: usize,
    /// `--node-monitor-period`, `--node-monitor-grace-period`, the eviction rates, ...
    pub node_lifecycle: nodelifecycle::Config,
    /// `--terminated-pod-gc-threshold`.
    pub terminated_pod_gc_threshold: usize,
    /// The CA bundle (PEM) published as `kube-root-ca.crt` in every namespace
    /// (`--root-ca-file`, else the kubeconfig's CA).
    pub root_ca: String,
    /// `None`: `--secure-port=0`, no serving.
    pub secure_addr: Option<SocketAddr>,
    pub serving: Serving,
}

/// What every controller's start function gets.
#[derive(Clone)]
pub struct Context {
    /// The controller's own client (its service account with
    /// `--use-service-account-credentials`); its events are written with it too.
    pub client: kube::Client,
    pub informers: Arc<Informers>,
    pub metrics: Metrics,
    /// One event writer per controller (as upstream's one broadcaster each), run by [`run`].
    pub event_writers: Arc<std::sync::Mutex<Vec<record::EventWriter<record::KubeSink>>>>,
    pub config: Config,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Context {
    /// An event recorder for `component` (`replicaset-controller`, ...) and its writer.
    pub fn recorder(&self, component: &str) -> Arc<dyn Recorder> {
        let source = record::Source { component: component.to_string(), host: None };
        let (recorder, queue) = record::channel(source, record::QUEUE_CAPACITY);
        let writer = record::EventWriter::new(record::KubeSink::new(self.client.clone()), queue);
        self.event_writers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(writer);
        Arc::new(recorder)
    }

    /// A queue named `name`, its metrics registered.
    pub fn queue(&self, name: &str) -> Arc<WorkQueue<crate::key::Key>> {
        let q = WorkQueue::new(name, self.metrics.queues.clone());
        self.metrics.add_refresher(q.clone());
        q
    }
}

/// A controller's start: registers its informer handlers now, and returns its run (workers
/// until the token is cancelled), started once the caches are synced.
pub type Start =
    fn(&Context) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// One row per controller.
#[derive(Debug, Clone, Copy)]
pub struct Descriptor {
    /// Upstream's name (`replicaset-controller`).
    pub name: &'static str,
    /// The older short name `--controllers` also accepts (`replicaset`).
    pub alias: &'static str,
    pub enabled_by_default: bool,
    /// The service account in `kube-system` it acts as with `--use-service-account-credentials`
    /// (upstream's `ClientOrDie` name; the taint-eviction controller shares `node-controller`'s).
    pub account: &'static str,
    pub start: Start,
}

/// Every controller this manager runs.
pub const CONTROLLERS: &[Descriptor] = &[
    Descriptor {
        name: "replicaset-controller",
        alias: "replicaset",
        enabled_by_default: true,
        account: "replicaset-controller",
        start: start_replicaset,
    },
    Descriptor {
        name: "deployment-controller",
        alias: "deployment",
        enabled_by_default: true,
        account: "deployment-controller",
        start: start_deployment,
    },
    Descriptor {
        name: "serviceaccount-controller",
        alias: "serviceaccount",
        enabled_by_default: true,
        account: "service-account-controller",
        start: start_serviceaccount,
    },
    Descriptor {
        name: "root-ca-certificate-publisher-controller",
        alias: "root-ca-cert-publisher",
        enabled_by_default: true,
        account: "root-ca-cert-publisher",
        start: start_root_ca_publisher,
    },
    Descriptor {
        name: "job-controller",
        alias: "job",
        enabled_by_default: true,
        account: "job-controller",
        start: start_job,
    },
    Descriptor {
        name: "cronjob-controller",
        alias: "cronjob",
        enabled_by_default: true,
        account: "cronjob-controller",
        start: start_cronjob,
    },
    Descriptor {
        name: "ttl-after-finished-controller",
        alias: "ttl-after-finished",
        enabled_by_default: true,
        account: "ttl-after-finished-controller",
        start: start_ttl_after_finished,
    },
    Descriptor {
        name: "garbage-collector-controller",
        alias: "garbagecollector",
        enabled_by_default: true,
        account: "generic-garbage-collector",
        start: start_gc,
    },
    Descriptor {
        name: "daemonset-controller",
        alias: "daemonset",
        enabled_by_default: true,
        account: "daemon-set-controller",
        start: start_daemonset,
    },
    Descriptor {
        name: "node-lifecycle-controller",
        alias: "nodelifecycle",
        enabled_by_default: true,
        account: "node-controller",
        start: start_nodelifecycle,
    },
    Descriptor {
        name: "taint-eviction-controller",
        alias: "taint-eviction-controller",
        enabled_by_default: true,
        account: "node-controller",
        start: start_tainteviction,
    },
    Descriptor {
        name: "pod-garbage-collector-controller",
        alias: "podgc",
        enabled_by_default: true,
        account: "pod-garbage-collector",
        start: start_podgc,
    },
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ControllersError {
    #[error("{0:?} is not in the list of known controllers")]
    Unknown(String),
}

/// Checks `--controllers` names (upstream's validation).
pub fn validate_controllers(flags: &[String]) -> Result<(), ControllersError> {
    for f in flags {
        let name = f.strip_prefix('-').unwrap_or(f);
        if name != "*" && !CONTROLLERS.iter().any(|d| d.name == name || d.alias == name) {
            return Err(ControllersError::Unknown(f.clone()));
        }
    }
    Ok(())
}

/// Upstream's `IsControllerEnabled`: an explicit name or `-name` decides; otherwise `*` enables
/// the controllers on by default.
pub fn is_enabled(d: &Descriptor, flags: &[String]) -> bool {
    let mut star = false;
    for f in flags {
        if f == d.name || f == d.alias {
            return true;
        }
        if let Some(n) = f.strip_prefix('-')
            && (n == d.name || n == d.alias)
        {
            return false;
        }
        star |= f == "*";
    }
    star && d.enabled_by_default
}

fn start_replicaset(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (rs, pods) = (ctx.informers.get::<ReplicaSet>(), ctx.informers.get::<Pod>());
    let queue = ctx.queue(replicaset::NAME);
    let ctrl = Arc::new(replicaset::ReplicaSetController {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        recorder: ctx.recorder(replicaset::COMPONENT),
        replica_sets: rs.cache(),
        pods: pods.cache(),
        queue: queue.clone(),
        expectations: Arc::new(Expectations::default()),
        burst_replicas: replicaset::BURST_REPLICAS,
        now: jiff::Timestamp::now,
    });
    ctrl.register(&rs, &pods);
    let (workers, metrics) = (ctx.config.concurrent_replicaset_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| {
        Box::pin(worker::run(replicaset::NAME, queue, ctrl, workers, metrics, stop))
    })
}

fn start_deployment(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (d, rs, pods) = (
        ctx.informers.get::<Deployment>(),
        ctx.informers.get::<ReplicaSet>(),
        ctx.informers.get::<Pod>(),
    );
    let queue = ctx.queue(deployment::NAME);
    let ctrl = Arc::new(deployment::DeploymentController {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        recorder: ctx.recorder(deployment::COMPONENT),
        deployments: d.cache(),
        replica_sets: rs.cache(),
        pods: pods.cache(),
        queue: queue.clone(),
        now: jiff::Timestamp::now,
    });
    ctrl.register(&d, &rs, &pods);
    let (workers, metrics) = (ctx.config.concurrent_deployment_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| {
        Box::pin(worker::run(deployment::NAME, queue, ctrl, workers, metrics, stop))
    })
}

fn start_serviceaccount(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (ns, sa) = (ctx.informers.get::<Namespace>(), ctx.informers.get::<ServiceAccount>());
    let queue = ctx.queue(serviceaccount::NAME);
    let ctrl = Arc::new(serviceaccount::ServiceAccountsController {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        namespaces: ns.cache(),
        service_accounts: sa.cache(),
        queue: queue.clone(),
    });
    ctrl.register(&ns, &sa);
    let (workers, metrics) =
        (ctx.config.concurrent_serviceaccount_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| {
        Box::pin(worker::run(serviceaccount::NAME, queue, ctrl, workers, metrics, stop))
    })
}

fn start_root_ca_publisher(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (ns, cm) = (ctx.informers.get::<Namespace>(), ctx.informers.get::<ConfigMap>());
    let queue = ctx.queue(rootcacertpublisher::NAME);
    let ctrl = Arc::new(rootcacertpublisher::Publisher {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        namespaces: ns.cache(),
        config_maps: cm.cache(),
        root_ca: ctx.config.root_ca.clone(),
        queue: queue.clone(),
    });
    ctrl.register(&ns, &cm);
    let metrics = ctx.metrics.queues.clone();
    Box::new(move |stop| {
        Box::pin(worker::run(rootcacertpublisher::NAME, queue, ctrl, 1, metrics, stop))
    })
}

fn start_job(ctx: &Context) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (jobs, pods) = (ctx.informers.get::<Job>(), ctx.informers.get::<Pod>());
    let queue = ctx.queue(job::NAME);
    let ctrl = Arc::new(job::JobController {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        recorder: ctx.recorder(job::COMPONENT),
        jobs: jobs.cache(),
        pods: pods.cache(),
        queue: queue.clone(),
        expectations: Arc::new(Expectations::default()),
        clock: Arc::new(SystemClock),
        backoff: std::sync::Mutex::default(),
    });
    ctrl.register(&jobs, &pods);
    let (workers, metrics) = (ctx.config.concurrent_job_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| Box::pin(worker::run(job::NAME, queue, ctrl, workers, metrics, stop)))
}

fn start_cronjob(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (cron_jobs, jobs) = (ctx.informers.get::<CronJob>(), ctx.informers.get::<Job>());
    let queue = ctx.queue(cronjob::NAME);
    let ctrl = Arc::new(cronjob::CronJobController {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        recorder: ctx.recorder(cronjob::COMPONENT),
        cron_jobs: cron_jobs.cache(),
        jobs: jobs.cache(),
        queue: queue.clone(),
        clock: Arc::new(SystemClock),
    });
    ctrl.register(&cron_jobs, &jobs);
    let (workers, metrics) = (ctx.config.concurrent_cron_job_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| Box::pin(worker::run(cronjob::NAME, queue, ctrl, workers, metrics, stop)))
}

fn start_ttl_after_finished(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let jobs = ctx.informers.get::<Job>();
    let queue = ctx.queue(ttl_after_finished::NAME);
    let ctrl = Arc::new(ttl_after_finished::TtlAfterFinishedController {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        jobs: jobs.cache(),
        queue: queue.clone(),
        clock: Arc::new(SystemClock),
    });
    ctrl.register(&jobs);
    let (workers, metrics) =
        (ctx.config.concurrent_ttl_after_finished_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| {
        Box::pin(worker::run(ttl_after_finished::NAME, queue, ctrl, workers, metrics, stop))
    })
}

fn start_gc(ctx: &Context) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    if !ctx.config.enable_garbage_collector {
        tracing::info!("--enable-garbage-collector=false: the garbage collector does not run");
        return Box::new(|_| Box::pin(async {}));
    }
    let resources = Arc::new(gc::client::Resources::default());
    let client =
        gc::client::DynamicClient { client: ctx.client.clone(), resources: resources.clone() };
    let (delete_queue, orphan_queue) = (ctx.queue(gc::DELETE_QUEUE), ctx.queue(gc::ORPHAN_QUEUE));
    let collector = Arc::new(gc::GarbageCollector::new(
        Arc::new(client),
        delete_queue.clone(),
        orphan_queue.clone(),
    ));
    let (kube, workers, metrics) =
        (ctx.client.clone(), ctx.config.concurrent_gc_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| {
        Box::pin(async move {
            let (synced, tasks) = (CancellationToken::new(), TaskTracker::new());
            tasks.spawn(gc::monitors::run(
                collector.clone(),
                kube,
                resources,
                synced.clone(),
                stop.clone(),
            ));
            tokio::select! {
                () = stop.cancelled() => {}
                () = synced.cancelled() => {
                    let deleter = Arc::new(gc::AttemptToDelete(collector.clone()));
                    let orphaner = Arc::new(gc::AttemptToOrphan(collector));
                    tasks.spawn(worker::run(gc::DELETE_QUEUE, delete_queue, deleter, workers, metrics.clone(), stop.clone()));
                    tasks.spawn(worker::run(gc::ORPHAN_QUEUE, orphan_queue, orphaner, workers, metrics, stop.clone()));
                }
            }
            tasks.close();
            tasks.wait().await;
        })
    })
}

fn start_daemonset(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (ds, nodes, pods) =
        (ctx.informers.get::<DaemonSet>(), ctx.informers.get::<Node>(), ctx.informers.get::<Pod>());
    let queue = ctx.queue(daemon::NAME);
    let ctrl = Arc::new(daemon::DaemonSetController {
        client: Arc::new(KubeClient { client: ctx.client.clone() }),
        recorder: ctx.recorder(daemon::COMPONENT),
        daemon_sets: ds.cache(),
        nodes: nodes.cache(),
        pods: pods.cache(),
        revisions: ctx.informers.get::<ControllerRevision>().cache(),
        queue: queue.clone(),
        expectations: Arc::new(Expectations::default()),
        burst_replicas: daemon::BURST_REPLICAS,
        now: jiff::Timestamp::now,
        failed_pods_backoff: daemon::backoff::Backoff::default(),
    });
    ctrl.register(&ds, &nodes, &pods);
    let (workers, metrics) = (ctx.config.concurrent_daemonset_syncs, ctx.metrics.queues.clone());
    Box::new(move |stop| Box::pin(worker::run(daemon::NAME, queue, ctrl, workers, metrics, stop)))
}

fn start_nodelifecycle(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (nodes, leases, pods) =
        (ctx.informers.get::<Node>(), ctx.informers.get::<Lease>(), ctx.informers.get::<Pod>());
    let ctrl = Arc::new(nodelifecycle::NodeLifecycleController::new(
        Arc::new(KubeClient { client: ctx.client.clone() }),
        ctx.recorder(nodelifecycle::COMPONENT),
        nodes.cache(),
        leases.cache(),
        pods.cache(),
        ctx.config.node_lifecycle.clone(),
        jiff::Timestamp::now,
    ));
    let metrics = ctx.metrics.queues.clone();
    Box::new(move |stop| Box::pin(ctrl.run(metrics, stop)))
}

fn start_tainteviction(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (nodes, pods) = (ctx.informers.get::<Node>(), ctx.informers.get::<Pod>());
    let ctrl = Arc::new(tainteviction::TaintEvictionController::new(
        Arc::new(KubeClient { client: ctx.client.clone() }),
        ctx.recorder(tainteviction::COMPONENT),
        nodes.cache(),
        pods.cache(),
    ));
    ctrl.register(&nodes, &pods);
    let metrics = ctx.metrics.queues.clone();
    Box::new(move |stop| Box::pin(ctrl.run(metrics, stop)))
}

fn start_podgc(
    ctx: &Context,
) -> Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send> {
    let (nodes, pods) = (ctx.informers.get::<Node>(), ctx.informers.get::<Pod>());
    let gc = Arc::new(podgc::PodGc::new(
        Arc::new(KubeClient { client: ctx.client.clone() }),
        nodes.cache(),
        pods.cache(),
        ctx.config.terminated_pod_gc_threshold,
    ));
    let metrics = ctx.metrics.queues.clone();
    Box::new(move |stop| Box::pin(gc.run(metrics, stop)))
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    LeaderElectionLost(#[from] LeaderError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
}

/// Runs until `stop`; an error is a lost lease (exit, as upstream) or a port that cannot serve.
pub async fn run(
    clients: ClientBuilder,
    config: Config,
    stop: CancellationToken,
) -> Result<(), RunError> {
    let client = clients.root().clone();
    let metrics = Metrics::default();
    let tracker = TaskTracker::new();
    let server_stop = CancellationToken::new();
    if let Some(addr) = config.secure_addr {
        let server = SecureServer::bind(addr, &config.serving).await?;
        tracker.spawn(server.serve(metrics.clone(), server_stop.clone()));
    }
    let mut elector = config.leader_election.clone().map(|e| LeaderElector::new(client.clone(), e));
    if let Some(elector) = elector.as_mut()
        && !elector.acquire(&stop).await
    {
        server_stop.cancel();
        tracker.close();
        tracker.wait().await;
        return Ok(());
    }

    let ctx = Context {
        client: client.clone(),
        informers: Arc::new(Informers::default()),
        metrics,
        event_writers: Arc::default(),
        config: config.clone(),
    };
    let mut runs = Vec::new();
    for d in CONTROLLERS {
        if is_enabled(d, &config.controllers) {
            tracing::info!(controller = d.name, "starting");
            let own = Context { client: clients.client(d.account)?, ..ctx.clone() };
            runs.push((d.name, (d.start)(&own)));
        } else {
            tracing::info!(controller = d.name, "disabled");
        }
    }
    let (informers_stop, events_stop, controllers_stop) =
        (CancellationToken::new(), CancellationToken::new(), stop.child_token());
    let (informer_tasks, writers, workers) =
        (TaskTracker::new(), TaskTracker::new(), TaskTracker::new());
    ctx.informers.start(&client, &informer_tasks, &informers_stop);
    for w in std::mem::take(
        &mut *ctx.event_writers.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
    ) {
        writers.spawn(w.run(events_stop.clone()));
    }
    let leading = async {
        match elector.as_mut() {
            Some(e) => e.keep(&stop).await,
            None => {
                stop.cancelled().await;
                Ok(())
            }
        }
    };
    let start_workers = async {
        if ctx.informers.wait_synced(&controllers_stop).await {
            tracing::info!("caches synced; controllers running");
            for (_, run) in runs {
                workers.spawn(run(controllers_stop.clone()));
            }
        }
        std::future::pending::<()>().await;
    };
    let kept = tokio::select! {
        kept = leading => kept,
        () = start_workers => Ok(()),
    };
    controllers_stop.cancel();
    if let Err(lost) = kept {
        // Lost the lease: stop acting at once; the process exits.
        tracing::error!(error = %lost, "leader election lost; stopping");
        informers_stop.cancel();
        events_stop.cancel();
        server_stop.cancel();
        return Err(lost.into());
    }
    // Workers finish their syncs; then the informers stop, and with them the last references
    // to the controllers and their recorders, so each event writer ends once it has written
    // what was queued (or is cut off after EVENTS_FLUSH).
    workers.close();
    workers.wait().await;
    informers_stop.cancel();
    informer_tasks.close();
    informer_tasks.wait().await;
    drop(ctx);
    writers.close();
    if tokio::time::timeout(EVENTS_FLUSH, writers.wait()).await.is_err() {
        events_stop.cancel();
        writers.wait().await;
    }
    if let Some(e) = elector.as_mut() {
        e.release().await;
    }
    server_stop.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &[&str]) -> Vec<String> {
        s.iter().map(|f| (*f).to_string()).collect()
    }

    fn enabled(f: &[&str]) -> Vec<&'static str> {
        CONTROLLERS.iter().filter(|d| is_enabled(d, &flags(f))).map(|d| d.alias).collect()
    }

    #[test]
    fn controllers_flag_is_read_as_upstreams() {
        assert_eq!(
            enabled(&["*"]),
            [
                "replicaset",
                "deployment",
                "serviceaccount",
                "root-ca-cert-publisher",
                "job",
                "cronjob",
                "ttl-after-finished",
                "garbagecollector",
                "daemonset",
                "nodelifecycle",
                "taint-eviction-controller",
                "podgc"
            ]
        );
        assert_eq!(
            enabled(&[
                "*",
                "-deployment",
                "-job",
                "-cronjob",
                "-ttl-after-finished",
                "-garbagecollector",
                "-nodelifecycle",
                "-taint-eviction-controller",
                "-podgc",
                "-root-ca-cert-publisher"
            ]),
            ["replicaset", "serviceaccount", "daemonset"]
        );
        assert_eq!(enabled(&["replicaset"]), ["replicaset"]);
        assert_eq!(
            enabled(&[
                "-replicaset-controller",
                "-job-controller",
                "-garbage-collector-controller",
                "-cronjob-controller",
                "-ttl-after-finished-controller",
                "-daemonset-controller",
                "*"
            ]),
            [
                "deployment",
                "serviceaccount",
                "root-ca-cert-publisher",
                "nodelifecycle",
                "taint-eviction-controller",
                "podgc"
            ]
        );
        assert!(enabled(&[]).is_empty());
        assert_eq!(
            validate_controllers(&flags(&["*", "-deployment", "replicaset-controller"])),
            Ok(())
        );
        assert_eq!(
            validate_controllers(&flags(&["*", "-bogus"])).map_err(|e| e.to_string()),
            Err("\"-bogus\" is not in the list of known controllers".to_string())
        );
    }
}
