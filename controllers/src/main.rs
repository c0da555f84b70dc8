//! `controller-manager`: parses upstream kube-controller-manager's flags, sets up logging, and
//! runs the controllers until SIGTERM or SIGINT (workers finish their sync, the lease is
//! released). Exits non-zero when the lease is lost, as upstream.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use controllers::client_builder::ClientBuilder;
use controllers::manager::{self, Config};
use controllers::server::Serving;
use leaderelection::ElectionConfig;

/// Runs the ReplicaSet, Deployment, ServiceAccount, Job, CronJob, TTL-after-finished, DaemonSet,
/// node lifecycle, taint-eviction and pod GC controllers and the garbage collector. Flags follow
/// upstream's
/// kube-controller-manager.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// A kubeconfig for the apiserver (default: in-cluster, then $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Controllers to run: `*` (every one on by default), `name` enables, `-name` disables;
    /// comma-separated. Known: replicaset-controller, deployment-controller,
    /// serviceaccount-controller, root-ca-certificate-publisher-controller, job-controller,
    /// cronjob-controller,
    /// ttl-after-finished-controller, garbage-collector-controller, daemonset-controller,
    /// node-lifecycle-controller, taint-eviction-controller, pod-garbage-collector-controller
    /// (or replicaset, deployment, serviceaccount, root-ca-cert-publisher, job, cronjob,
    /// ttl-after-finished,
    /// garbagecollector, daemonset, nodelifecycle, podgc).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Take part in leader election on a Lease and run the controllers only while holding it.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// How long non-leaders wait after the lease was last seen renewed before taking it.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up leadership.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    leader_elect_renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader to renew.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    leader_elect_retry_period: Duration,
    /// The lease's name.
    #[arg(long, default_value = "kube-controller-manager")]
    leader_elect_resource_name: String,
    /// The lease's namespace.
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Requests per second to the apiserver (a token bucket; ≤ 0 disables the limit).
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f32,
    /// Requests allowed in a burst above the QPS.
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Run each controller as its own service account in kube-system (replicaset-controller,
    /// generic-garbage-collector, ...; created if missing, tokens from TokenRequest), the
    /// subjects the apiserver's bootstrap policy grants each controller's role to.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    use_service_account_credentials: bool,
    /// ReplicaSets synced concurrently.
    #[arg(long, default_value_t = 5)]
    concurrent_replicaset_syncs: usize,
    /// Deployments synced concurrently.
    #[arg(long, default_value_t = 5)]
    concurrent_deployment_syncs: usize,
    /// Namespaces whose ServiceAccounts are synced concurrently.
    #[arg(long, default_value_t = 1)]
    concurrent_serviceaccount_syncs: usize,
    /// Jobs synced concurrently.
    #[arg(long, default_value_t = 5)]
    concurrent_job_syncs: usize,
    /// CronJobs synced concurrently.
    #[arg(long, default_value_t = 5)]
    concurrent_cron_job_syncs: usize,
    /// Finished Jobs checked for their TTL concurrently.
    #[arg(long, default_value_t = 5)]
    concurrent_ttl_after_finished_syncs: usize,
    /// Garbage collector workers (each of its two queues).
    #[arg(long, default_value_t = 20)]
    concurrent_gc_syncs: usize,
    /// Run the garbage collector (cascading deletion); with it off, owners' dependents stay.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    enable_garbage_collector: bool,
    /// DaemonSets synced concurrently.
    #[arg(long, default_value_t = 2)]
    concurrent_daemonset_syncs: usize,
    /// How often the node lifecycle controller checks nodes' heartbeats.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    node_monitor_period: Duration,
    /// How long a node may go without a heartbeat (Lease renewal or status) before its
    /// conditions are set Unknown.
    #[arg(long, default_value = "40s", value_parser = humantime::parse_duration)]
    node_monitor_grace_period: Duration,
    /// The grace period for a node that has not yet posted a Ready condition.
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    node_startup_grace_period: Duration,
    /// Nodes per second per zone that get NoExecute taints when the zone is healthy.
    #[arg(long, default_value_t = 0.1)]
    node_eviction_rate: f64,
    /// Nodes per second per zone that get NoExecute taints when the zone is unhealthy (and
    /// larger than --large-cluster-size-threshold; smaller unhealthy zones get none).
    #[arg(long, default_value_t = 0.01)]
    secondary_node_eviction_rate: f64,
    /// Zones with more nodes than this use --secondary-node-eviction-rate when unhealthy.
    #[arg(long, default_value_t = 50)]
    large_cluster_size_threshold: usize,
    /// The fraction of not-ready nodes (at least 3) that makes a zone unhealthy.
    #[arg(long, default_value_t = 0.55)]
    unhealthy_zone_threshold: f64,
    /// Finished pods kept before the pod GC deletes the oldest; 0 disables that.
    #[arg(long, default_value_t = 12500)]
    terminated_pod_gc_threshold: usize,
    /// The CA bundle (PEM) published in every namespace as the ConfigMap `kube-root-ca.crt`
    /// (default: the CA of --kubeconfig).
    #[arg(long)]
    root_ca_file: Option<PathBuf>,
    /// The HTTPS port for /healthz and /metrics; 0 disables it.
    #[arg(long, default_value_t = 10257)]
    secure_port: u16,
    /// The address the secure port listens on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// The serving certificate (PEM); with --tls-private-key-file.
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    #[arg(long)]
    tls_private_key_file: Option<PathBuf>,
    /// Where a self-signed serving certificate is kept when none is given (in memory if unset).
    #[arg(long)]
    cert_dir: Option<PathBuf>,
    #[command(flatten)]
    log: daemon::LogArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init();
    manager::validate_controllers(&args.controllers)?;
    if args.tls_cert_file.is_some() != args.tls_private_key_file.is_some() {
        anyhow::bail!("--tls-cert-file and --tls-private-key-file must be given together");
    }
    let hostname =
        nix::unistd::gethostname().context("reading the hostname")?.to_string_lossy().into_owned();
    let identity = leaderelection::identity(&hostname);
    let election = args.leader_elect.then(|| ElectionConfig {
        namespace: args.leader_elect_resource_namespace.clone(),
        name: args.leader_elect_resource_name.clone(),
        identity: identity.clone(),
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    });
    if let Some(e) = &election {
        e.validate()?;
    }
    let kube_config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading {}", path.display()))?
        }
        None => kube::Config::infer().await.context("finding a kubeconfig")?,
    };
    let root_ca = root_ca(&args, &kube_config)?;
    let config = Config {
        controllers: args.controllers.clone(),
        leader_election: election,
        concurrent_replicaset_syncs: args.concurrent_replicaset_syncs,
        concurrent_deployment_syncs: args.concurrent_deployment_syncs,
        concurrent_serviceaccount_syncs: args.concurrent_serviceaccount_syncs,
        concurrent_job_syncs: args.concurrent_job_syncs,
        concurrent_cron_job_syncs: args.concurrent_cron_job_syncs,
        concurrent_ttl_after_finished_syncs: args.concurrent_ttl_after_finished_syncs,
        concurrent_gc_syncs: args.concurrent_gc_syncs,
        enable_garbage_collector: args.enable_garbage_collector,
        concurrent_daemonset_syncs: args.concurrent_daemonset_syncs,
        node_lifecycle: controllers::nodelifecycle::Config {
            monitor_period: args.node_monitor_period,
            grace_period: args.node_monitor_grace_period,
            startup_grace_period: args.node_startup_grace_period,
            eviction_rate: args.node_eviction_rate,
            secondary_eviction_rate: args.secondary_node_eviction_rate,
            large_cluster_threshold: args.large_cluster_size_threshold,
            unhealthy_zone_threshold: args.unhealthy_zone_threshold,
        },
        terminated_pod_gc_threshold: args.terminated_pod_gc_threshold,
        root_ca,
        secure_addr: (args.secure_port != 0)
            .then(|| SocketAddr::new(args.bind_address, args.secure_port)),
        serving: Serving {
            cert_file: args.tls_cert_file.clone(),
            key_file: args.tls_private_key_file.clone(),
            cert_dir: args.cert_dir.clone(),
        },
    };
    let client = kube::client::ClientBuilder::try_from(kube_config.clone())?
        .with_layer(&controllers::throttle::ThrottleLayer::new(
            args.kube_api_qps,
            args.kube_api_burst,
        ))
        .build();
    let clients = if args.use_service_account_credentials {
        ClientBuilder::service_accounts(
            client,
            &kube_config,
            args.kube_api_qps,
            args.kube_api_burst,
        )
    } else {
        ClientBuilder::Root(client)
    };
    tracing::info!(identity = %identity, leader_elect = args.leader_elect, "starting the controller-manager");
    let stop = daemon::stop_on_signal("controllers finish their syncs")?;
    controllers::run(clients, config, stop).await.context("controller-manager")
}

/// What the root CA publisher publishes: `--root-ca-file`, else the kubeconfig's CA (as
/// upstream's). Without either, a publisher that is to run is a start-up error.
fn root_ca(args: &Args, kube_config: &kube::Config) -> anyhow::Result<String> {
    if let Some(f) = &args.root_ca_file {
        let pem = std::fs::read_to_string(f)
            .with_context(|| format!("--root-ca-file {}", f.display()))?;
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            anyhow::bail!("--root-ca-file {}: no PEM certificate in it", f.display());
        }
        return Ok(pem);
    }
    let from_kubeconfig = kube_config.root_cert.as_deref().unwrap_or_default();
    let publisher = manager::CONTROLLERS
        .iter()
        .find(|d| d.name == "root-ca-certificate-publisher-controller")
        .is_some_and(|d| manager::is_enabled(d, &args.controllers));
    if from_kubeconfig.is_empty() && publisher {
        anyhow::bail!(
            "root-ca-certificate-publisher-controller: no CA to publish: give --root-ca-file or a kubeconfig with certificate-authority(-data)"
        );
    }
    Ok(controllers::rootcacertpublisher::pem_bundle(from_kubeconfig))
}
