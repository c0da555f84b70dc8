//! Wiring: connects to the runtime, starts the sources, the mux, PLEG, the servers and the sync
//! loop under one task tracker, and stops them all on cancellation, leaving pods running.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use proto::{ClientOptions, CriClient, UnixEndpoint, cri};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::KubeletError;
use crate::cm::allocatable::{Capacity, Reservable};
use crate::cm::manager::{NodeResources, StartError};
use crate::cm::systemd::SystemdCgroups;
use crate::cm::{CgroupDriver, CgroupFs, Cgroups, ContainerManager};
use crate::config::Source;
use crate::config::apiserver::ApiSource;
use crate::config::checkpoint::Checkpoints;
use crate::config::file::FileSource;
use crate::config::http::HttpSource;
use crate::config::kubelet_config::KubeletConfig;
use crate::config::mux::{self, SourcesReady};
use crate::events::{self, Recorder};
use crate::fieldpath::Allocatable;
use crate::metrics::KubeletMetrics;
use crate::mirror::MirrorSync;
use crate::node_status::machine::{NodeSample, ReadingSource};
use crate::node_status::reporter::{NodeStatusReporter, now};
use crate::node_status::{self, MachineInfo, NodeFacts, Readings};
use crate::nodelease::LeaseController;
use crate::nodeshutdown::logind::{InhibitLock, SystemLogind};
use crate::nodeshutdown::manager::ShutdownManager;
use crate::objects::api::ApiWatcher;
use crate::objects::static_config::{StaticConfigObjects, StaticConfigSource};
use crate::objects::watch::WatchBasedManager;
use crate::objects::{ObjectManager, ObjectSources};
use crate::pleg::{self, Pleg, PlegHealth, RuntimePods};
use crate::pod_workers::{PodWorkers, WorkQueue, WorkerContext};
use crate::prober::{ProbeManager, ProbeResults, ProberContext};
use crate::runtime::adoption;
use crate::runtime::{RuntimeConfig, RuntimeManager};
use crate::server::{self, ServerState};
use crate::stats::StatsProvider;
use crate::status::StatusManager;
use crate::status::sync::StatusSync;
use crate::sync_loop::{Inputs, SyncLoop};
use crate::token::TokenManager;
use crate::token::api::ApiTokenSource;
use crate::volume::VolumeManager;
use crate::volume::mount::HostMounter;
use crate::watchdog::{Notification, Notifier, SdNotify, SyncLoopHealth, Watchdog};

/// The address the node uses for outbound traffic (no packet is sent).
fn host_ip() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    socket.local_addr().ok().map(|a| a.ip().to_string()).filter(|ip| ip != "0.0.0.0")
}

/// Connects to the runtime, retrying (with a message each time) until it answers or `stop`.
async fn connect_runtime(
    endpoint: &UnixEndpoint,
    options: ClientOptions,
    stop: &CancellationToken,
) -> Option<CriClient> {
    let mut delay = Duration::from_millis(200);
    loop {
        match CriClient::connect(endpoint, options.clone()).await {
            Ok(c) => {
                let v = c.version();
                tracing::info!(endpoint = %endpoint, runtime = %v.runtime_name, version = %v.runtime_version, "connected to the container runtime");
                return Some(c);
            }
            Err(e) => {
                tracing::warn!(error = %e, "container runtime not available; retrying in {delay:?}")
            }
        }
        tokio::select! {
            () = stop.cancelled() => return None,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// The apiserver client from `--kubeconfig`.
async fn api_client(path: &Path) -> Result<kube::Client, KubeletError> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|source| KubeletError::Kubeconfig { path: path.into(), source })?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|source| KubeletError::Kubeconfig { path: path.into(), source })?;
    kube::Client::try_from(config)
        .map_err(|source| KubeletError::Client { path: path.into(), source })
}

/// The recorder of a joined kubelet: pod events also go to the apiserver, through the shared
/// writer, which runs on `tasks`.
fn joined_recorder(
    client: &kube::Client,
    node_name: &str,
    tasks: &TaskTracker,
    stop: &CancellationToken,
) -> Recorder {
    let (events, queue) = events::api::channel(node_name);
    let writer = record::EventWriter::new(record::KubeSink::new(client.clone()), queue);
    tasks.spawn(writer.run(stop.clone()));
    Recorder::joined(events)
}

/// What the node has of each reservable resource, for checking the reservations.
fn node_capacity(machine: &MachineInfo, sample: &NodeSample) -> Capacity {
    let mut capacity = BTreeMap::from([
        (Reservable::Cpu, machine.milli_cpus()),
        (Reservable::Memory, machine.memory_bytes),
    ]);
    if let Some(fs) = sample.nodefs {
        capacity.insert(Reservable::EphemeralStorage, fs.capacity);
    }
    if let Some(max) = sample.max_tasks {
        capacity.insert(Reservable::Pid, max);
    }
    Capacity(capacity)
}

/// Graceful node shutdown, where systemd-logind is there to ask: its lock taken, or one error
/// line saying why not (as upstream, the kubelet runs on without it).
async fn start_shutdown_manager(
    config: &KubeletConfig,
    statuses: &Arc<StatusManager>,
    evictions: &mpsc::Sender<crate::eviction::manager::Eviction>,
    recorder: &Recorder,
    shutting_down: watch::Sender<bool>,
) -> Option<(ShutdownManager, InhibitLock)> {
    let logind = match SystemLogind::connect().await {
        Ok(logind) => logind,
        Err(e) => {
            tracing::error!(error = %e, grace = ?config.shutdown.grace_period, "graceful node shutdown is off: systemd-logind cannot be reached, so pods are not stopped gracefully when the node shuts down");
            return None;
        }
    };
    let manager = ShutdownManager {
        config: config.shutdown,
        logind: Arc::new(logind),
        logind_conf_dir: PathBuf::from(crate::nodeshutdown::logind::LOGIND_CONF_DIR),
        statuses: statuses.clone(),
        evictions: evictions.clone(),
        recorder: recorder.clone(),
        node: config.node_name.clone(),
        shutting_down,
    };
    match manager.start().await {
        Ok(lock) => {
            tracing::info!(grace = ?config.shutdown.grace_period, critical = ?config.shutdown.critical_grace_period, "graceful node shutdown: holding systemd-logind's delay lock");
            Some((manager, lock))
        }
        Err(e) => {
            tracing::error!(error = %e, "Failed to start node shutdown manager: graceful node shutdown is off");
            None
        }
    }
}

/// A directory on the runtime's image filesystem, as CRI `ImageFsInfo` names it (asked once: a
/// runtime does not move its images while running); `None`, with a warning, when the runtime
/// does not say, and the `imagefs` signals go unobserved.
async fn image_fs_dir(cri: &CriClient) -> Option<PathBuf> {
    let info = cri.image_fs_info(cri::ImageFsInfoRequest {}).await;
    let mountpoint = match &info {
        Ok(info) => info
            .image_filesystems
            .iter()
            .find_map(|fs| fs.fs_id.as_ref().map(|id| id.mountpoint.clone())),
        Err(e) => {
            tracing::warn!(error = %e, "the runtime did not name its image filesystem; imagefs thresholds go unobserved");
            return None;
        }
    };
    let dir = mountpoint.filter(|m| Path::new(m).is_dir()).map(PathBuf::from);
    if dir.is_none() {
        tracing::warn!(
            ?info,
            "the runtime's image filesystem is not a directory here; imagefs thresholds go unobserved"
        );
    }
    dir
}

/// The host's cgroups through the configured driver: the cgroupfs at `/sys/fs/cgroup`, or
/// systemd's slices (refused where systemd is not the init system).
fn host_cgroups(driver: CgroupDriver) -> Result<Arc<dyn Cgroups>, StartError> {
    let cgroupfs = CgroupFs::new(Path::new("/sys/fs/cgroup").to_path_buf());
    Ok(match driver {
        CgroupDriver::Cgroupfs => Arc::new(cgroupfs),
        CgroupDriver::Systemd => Arc::new(SystemdCgroups::open(Path::new("/"), cgroupfs)?),
    })
}

/// Runs the kubelet until `stop` is cancelled. Pods keep running after it returns.
pub async fn run(config: KubeletConfig, stop: CancellationToken) -> Result<(), KubeletError> {
    config.validate()?;
    let watchdog_timeout = crate::watchdog::timeout_from_env()?;
    // `validate` checked the settings.
    let node_config = config.node_config().map_err(|e| {
        crate::config::kubelet_config::ConfigError::Invalid { field: e.field, reason: e.reason }
    })?;
    // The cgroup driver before anything waits for the runtime, as upstream makes its container
    // manager first.
    let cgroups = host_cgroups(node_config.layout.driver)?;
    let endpoint: UnixEndpoint = config.container_runtime_endpoint.parse()?;
    let options =
        ClientOptions { call_timeout: config.runtime_request_timeout, ..ClientOptions::default() };
    let client = match &config.kubeconfig {
        Some(path) => Some(api_client(path).await?),
        None => None,
    };
    let Some(cri) = connect_runtime(&endpoint, options, &stop).await else { return Ok(()) };
    let metrics = Arc::new(KubeletMetrics::new(&config.node_name));
    // Every CRI call from here on is counted as a runtime operation.
    let cri = cri.observed_by(metrics.runtime.clone());

    let machine = MachineInfo::read(Path::new("/"));
    let readings = ReadingSource {
        root: "/".into(),
        kubelet_dir: config.root_dir.clone(),
        image_fs_dir: image_fs_dir(&cri).await,
    };
    let allocatable = config.node_allocatable();
    let first_sample = readings.sample();
    allocatable.validate(&node_capacity(&machine, &first_sample))?;

    let tasks = TaskTracker::new();
    let child = stop.child_token();
    let recorder = match &client {
        Some(client) => joined_recorder(client, &config.node_name, &tasks, &child),
        None => Recorder::default(),
    };
    let host_ip = config.node_ip.map(|ip| ip.to_string()).or_else(host_ip);
    let (objects_tx, objects_rx) = mpsc::unbounded_channel();
    let api_objects: Option<Arc<dyn ObjectManager>> = client.as_ref().map(|client| {
        let watcher = Arc::new(ApiWatcher { client: client.clone() });
        let changes = objects_tx.clone();
        let manager = WatchBasedManager::new(watcher, changes, tasks.clone(), child.clone());
        Arc::new(manager) as Arc<dyn ObjectManager>
    });
    let (static_config_tx, static_config_rx) = watch::channel(Vec::new());
    let local_objects: Option<Arc<dyn ObjectManager>> =
        config.static_config_path.as_ref().map(|dir| {
            let manager = Arc::new(StaticConfigObjects::new(objects_tx.clone()));
            let source = StaticConfigSource {
                dir: dir.clone(),
                period: config.file_check_frequency,
                recorder: recorder.clone(),
            };
            tasks.spawn(source.run(manager.clone(), static_config_tx, child.clone()));
            manager as Arc<dyn ObjectManager>
        });
    drop(objects_tx);
    let object_sources = ObjectSources { api: api_objects, local: local_objects };
    let volumes = VolumeManager {
        root_dir: config.root_dir.clone(),
        mounter: Arc::new(HostMounter),
        objects: object_sources.clone(),
        tokens: client.as_ref().map(|client| {
            Arc::new(TokenManager::new(Arc::new(ApiTokenSource { client: client.clone() })))
        }),
        // Allocatable as the node reports it.
        allocatable: Allocatable {
            cpu_millis: i128::from(allocatable.allocatable(Reservable::Cpu, machine.milli_cpus())),
            memory_bytes: i128::from(
                allocatable.allocatable(Reservable::Memory, machine.memory_bytes),
            ),
        },
    };
    let cm = Arc::new(ContainerManager::new(
        cgroups,
        node_config,
        NodeResources {
            capacity: node_capacity(&machine, &first_sample),
            allocatable: allocatable.clone(),
        },
        recorder.clone(),
        config.node_name.clone(),
    ));
    cm.start()?;
    let cfs = cm.config().pod;
    let timeline = Arc::new(crate::pleg::timeline::PodTimeline::default());
    let runtime = Arc::new(
        RuntimeManager::new(
            cri.clone(),
            RuntimeConfig {
                pod_logs_dir: config.pod_logs_dir.clone(),
                root_dir: config.root_dir.clone(),
                resolv_conf: std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default(),
                memory_capacity: machine.memory_bytes,
                host_ip: host_ip.clone(),
                restart_backoff_max: config.restart_backoff_max,
            },
            cm,
            recorder.clone(),
            volumes,
            client.as_ref().map(|c| {
                Arc::new(crate::runtime::pull_secrets::ApiSecrets(c.clone()))
                    as Arc<dyn crate::runtime::pull_secrets::SecretSource>
            }),
            metrics.clone(),
        )
        .with_timeline(timeline.clone(), config.pleg_relist_period),
    );
    let statuses = Arc::new(StatusManager::default());
    let queue = Arc::new(WorkQueue::default());

    let (sets_tx, sets_rx) = mpsc::channel(16);
    let (updates_tx, updates_rx) = mpsc::channel(64);
    let (pleg_tx, pleg_rx) = mpsc::channel(1024);
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let (pods_tx, pods_rx) = watch::channel(RuntimePods::default());
    let (manifests_tx, manifests_rx) = watch::channel(Vec::new());
    let pleg_health = Arc::new(PlegHealth::default());

    let mut expected = Vec::new();
    if let Some(dir) = &config.static_pod_path {
        expected.push(Source::File);
        // Read once, before the first manifest is: the pods a kubelet (this one before a
        // restart, another build, upstream's) left running, to adopt those that match.
        let running = match adoption::running_pods(&cri, Source::File.as_str(), cfs).await {
            Ok(running) => running,
            Err(error) => {
                tracing::warn!(%error, "listing the running static pods to adopt; none is adopted");
                Vec::new()
            }
        };
        let source = FileSource {
            dir: dir.clone(),
            node_name: config.node_name.clone(),
            period: config.file_check_frequency,
            recorder: recorder.clone(),
            running,
            checkpoints: Checkpoints::new(&config.root_dir, &config.node_name),
        };
        tasks.spawn(source.run(sets_tx.clone(), manifests_tx, child.clone()));
    }
    let (manifest_url_tx, manifest_url_rx) = watch::channel(Vec::new());
    if let Some(url) = &config.static_pod_url {
        // Upstream: the source counts as seen after its first answer, not before.
        expected.push(Source::Http);
        let source = HttpSource {
            url: url.clone(),
            headers: config.static_pod_url_headers(),
            node_name: config.node_name.clone(),
            period: config.http_check_frequency,
            timeout: crate::config::http::fetch::TIMEOUT,
            recorder: recorder.clone(),
            running: match adoption::running_pods(&cri, Source::Http.as_str(), cfs).await {
                Ok(running) => running,
                Err(error) => {
                    tracing::warn!(%error, "listing the running URL pods to adopt; none is adopted");
                    Vec::new()
                }
            },
        };
        tasks.spawn(source.run(sets_tx.clone(), manifest_url_tx, child.clone()));
    }
    let (mirrors_tx, mirrors_rx) = watch::channel(None);
    if let Some(client) = &client {
        expected.push(Source::Api);
        let source = ApiSource {
            pods: kube::Api::all(client.clone()),
            node_name: config.node_name.clone(),
            mirrors: mirrors_tx,
        };
        tasks.spawn(source.run(sets_tx.clone(), child.clone()));
    }
    drop(sets_tx);
    let sources_ready = Arc::new(SourcesReady::new(expected));
    tasks.spawn(mux::run(
        sets_rx,
        updates_tx,
        sources_ready.clone(),
        recorder.clone(),
        child.clone(),
    ));
    let relist = Pleg {
        cri: cri.clone(),
        period: config.pleg_relist_period,
        events: pleg_tx.clone(),
        pods: pods_tx,
        health: pleg_health.clone(),
        metrics: metrics.clone(),
        timeline: timeline.clone(),
    };
    tasks.spawn(relist.run(child.clone()));
    tasks.spawn(pleg::run_evented(cri.clone(), pleg_tx, timeline.clone(), child.clone()));
    tasks.spawn(crate::heap::trim_periodically(child.clone()));
    let log_manager =
        crate::logs::ContainerLogManager::new(cri.clone(), config.container_log.clone());
    tasks.spawn(log_manager.run(child.clone()));
    let image_gc = Arc::new(crate::runtime::images::gc::ImageGcManager {
        cri: cri.clone(),
        policy: config.image_gc.clone(),
        image_fs_dir: readings.image_fs_dir.clone(),
        recorder: recorder.clone(),
        node: config.node_name.clone(),
        records: Default::default(),
    });
    tasks.spawn(image_gc.clone().run(child.clone()));

    let sync_loop_health = Arc::new(SyncLoopHealth::new(config.sync_frequency));
    let stats = Arc::new(
        StatsProvider::new(
            cri.clone(),
            config.node_name.clone(),
            readings.clone(),
            config.pod_logs_dir.clone(),
        )
        .with_cgroups(runtime.cm.clone(), tasks.clone())
        .with_housekeeping(timeline, config.pleg_relist_period),
    );
    let state = ServerState {
        statuses: statuses.clone(),
        manifests: manifests_rx,
        manifest_url: manifest_url_rx,
        static_config: static_config_rx,
        recorder: recorder.clone(),
        pleg: pleg_health.clone(),
        sync_loop: sync_loop_health.clone(),
        stats: stats.clone(),
        metrics: metrics.clone(),
    };
    let (evictions_tx, evictions_rx) = mpsc::channel(8);
    let evictions_for_shutdown = evictions_tx.clone();
    let (pressures_tx, pressures_rx) = watch::channel(Vec::new());
    let eviction_manager = crate::eviction::manager::EvictionManager {
        config: config.eviction()?,
        state: Default::default(),
        readings: readings.clone(),
        stats,
        statuses: statuses.clone(),
        cri: cri.clone(),
        image_gc: image_gc.clone(),
        root_dir: config.root_dir.clone(),
        evictions: evictions_tx.clone(),
        recorder: recorder.clone(),
        node: config.node_name.clone(),
        metrics: metrics.clone(),
        pressures: pressures_tx,
        sources_ready: sources_ready.clone(),
    };
    tasks.spawn(eviction_manager.run(child.clone()));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    if config.shutdown.enabled() {
        let started = start_shutdown_manager(
            &config,
            &statuses,
            &evictions_for_shutdown,
            &recorder,
            shutdown_tx,
        );
        if let Some((manager, lock)) = started.await {
            tasks.spawn(manager.run(lock, child.clone()));
        }
    }
    if config.read_only_port != 0 {
        let listener = server::bind(SocketAddr::new(config.address, config.read_only_port)).await?;
        tracing::info!(addr = ?listener.local_addr().ok(), "serving the read-only API (/pods, /healthz, /stats/summary, /metrics, /metrics/probes, /metrics/resource, /manifests, /events)");
        tasks.spawn(server::serve(
            listener,
            server::read_only_router(state.clone()),
            child.clone(),
        ));
    }
    let kubelet_port = server::secure::start(
        &config,
        state.clone(),
        runtime.clone(),
        host_ip.as_deref(),
        client.as_ref(),
        &tasks,
        child.clone(),
    )
    .await?;
    if config.healthz_port != 0 {
        let addr = SocketAddr::new(config.healthz_bind_address, config.healthz_port);
        let listener = server::bind(addr).await?;
        tasks.spawn(server::serve(listener, server::healthz_router(state), child.clone()));
    }

    let v = cri.version();
    let facts = NodeFacts {
        name: config.node_name.clone(),
        hostname: default_node_name(),
        internal_ip: host_ip.clone(),
        max_pods: config.max_pods,
        runtime_version: format!("{}://{}", v.runtime_name, v.runtime_version),
        kubelet_port,
        allocatable,
    };
    // Admission's node until the apiserver's is read: the kubelet's own view.
    let first_readings = Readings {
        observed: first_sample.observations(),
        runtime_health: Ok(()),
        pressures: Vec::new(),
    };
    let first = node_status::status(&facts, &machine, &first_readings, None, now());
    let (node_tx, node_rx) = watch::channel(Arc::new(node_status::node(&facts, &machine, first)));
    if let Some(client) = client {
        let reporter = NodeStatusReporter {
            nodes: kube::Api::all(client.clone()),
            facts,
            machine,
            readings,
            pleg: pleg_health.clone(),
            pressures: pressures_rx.clone(),
            shutting_down: shutdown_rx.clone(),
            update_frequency: config.node_status_update_frequency,
            report_frequency: config.node_status_report_frequency,
            node: node_tx,
        };
        tasks.spawn(reporter.run(child.clone()));
        let lease = LeaseController {
            leases: kube::Api::namespaced(client.clone(), crate::nodelease::NAMESPACE),
            nodes: kube::Api::all(client.clone()),
            node: config.node_name.clone(),
            duration_seconds: config.node_lease_duration_seconds,
        };
        tasks.spawn(lease.run(child.clone()));
        let mirrors = MirrorSync {
            statuses: statuses.clone(),
            mirrors: mirrors_rx.clone(),
            client: client.clone(),
            node_name: config.node_name.clone(),
            node: node_rx.clone(),
            sources_ready: sources_ready.clone(),
        };
        tasks.spawn(mirrors.run(child.clone()));
        let status_sync = StatusSync { manager: statuses.clone(), client, mirrors: mirrors_rx };
        tasks.spawn(status_sync.run(child.clone()));
    }

    let probe_results = Arc::new(ProbeResults::default());
    let prober = ProbeManager::new(
        Arc::new(ProberContext {
            cri: cri.clone(),
            statuses: statuses.clone(),
            results: probe_results.clone(),
            recorder: recorder.clone(),
            started: tokio::time::Instant::now(),
            metrics: metrics.clone(),
        }),
        child.child_token(),
    );
    let ctx = Arc::new(WorkerContext {
        runtime: runtime.clone(),
        statuses: statuses.clone(),
        recorder: recorder.clone(),
        probes: probe_results.clone(),
        reasons: Default::default(),
        queue: queue.clone(),
        done: done_tx,
        host_ip,
        resync: config.sync_frequency,
        metrics,
    });
    let workers = PodWorkers::new(ctx, child.child_token());
    let sync_loop = SyncLoop::new(
        workers,
        prober,
        probe_results,
        queue,
        statuses,
        runtime,
        sources_ready,
        recorder,
        node_rx,
    )
    .with_objects(object_sources)
    .with_pressures(pressures_rx)
    .with_shutdown(shutdown_rx)
    .with_health(sync_loop_health.clone());
    let inputs = Inputs {
        config: updates_rx,
        pleg: pleg_rx,
        done: done_rx,
        runtime_pods: pods_rx,
        objects: objects_rx,
        evictions: evictions_rx,
    };
    let notifier: Arc<dyn Notifier> = Arc::new(SdNotify);
    if let Some(timeout) = watchdog_timeout {
        let dog = Watchdog::new(timeout, sync_loop_health, notifier.clone());
        tasks.spawn(dog.run(child.clone()));
    }
    let status = format!("running: node {}", config.node_name);
    notify(notifier.as_ref(), &Notification::Ready { status });
    tracing::info!(node = %config.node_name, "kubelet started");
    sync_loop.run(inputs, child.clone()).await;
    let status = "stopping: pods keep running".to_string();
    notify(notifier.as_ref(), &Notification::Stopping { status });
    child.cancel();
    tasks.close();
    if tokio::time::timeout(Duration::from_secs(10), tasks.wait()).await.is_err() {
        tracing::warn!("some kubelet tasks did not stop within 10 s");
    }
    tracing::info!("kubelet stopped; pods keep running");
    Ok(())
}

/// Tells systemd (`Type=notify`) how the kubelet is, when run as such a unit.
fn notify(notifier: &dyn Notifier, n: &Notification) {
    if let Err(e) = notifier.notify(n) {
        tracing::warn!(error = %e, notification = ?n, "notifying systemd");
    }
}

/// The node's hostname, lowercased (the default node name).
pub fn default_node_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
        .to_lowercase()
}

/// Whether `ip` is a loopback address (for warnings about exposure).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}
