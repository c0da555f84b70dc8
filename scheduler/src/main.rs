//! `scheduler`: parses upstream kube-scheduler's flags, sets up logging, runs, and on SIGTERM or
//! SIGINT stops cleanly (bindings in flight finish, the lease is released).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use leaderelection::{self as leader, ElectionConfig};
use scheduler::schedule_one::Options;

/// Watches pods without a node, picks one for each with upstream's default filters and scores,
/// and binds it. Flags follow upstream's kube-scheduler.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// A kubeconfig for the apiserver (default: in-cluster, then $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Take part in leader election on a Lease and schedule only while holding it.
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
    #[arg(long, default_value = "kube-scheduler")]
    leader_elect_resource_name: String,
    /// The lease's namespace.
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Upstream's `percentageOfNodesToScore` (a KubeSchedulerConfiguration field): stop
    /// filtering once this share of nodes is feasible; 0 is upstream's adaptive default.
    #[arg(long, default_value_t = 0)]
    percentage_of_nodes_to_score: u32,
    /// Bindings in flight at most (an addition: upstream binds in unbounded goroutines).
    #[arg(long, default_value_t = 64)]
    max_bindings_in_flight: usize,
    #[command(flatten)]
    log: daemon::LogArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init();

    let hostname =
        nix::unistd::gethostname().context("reading the hostname")?.to_string_lossy().into_owned();
    let identity = leader::identity(&hostname);
    let config = scheduler::Config {
        scheduler_name: api::defaults::DEFAULT_SCHEDULER.to_string(),
        leader_election: args.leader_elect.then(|| ElectionConfig {
            namespace: args.leader_elect_resource_namespace.clone(),
            name: args.leader_elect_resource_name.clone(),
            identity: identity.clone(),
            lease_duration: args.leader_elect_lease_duration,
            renew_deadline: args.leader_elect_renew_deadline,
            retry_period: args.leader_elect_retry_period,
        }),
        instance: identity.clone(),
        options: Options {
            percentage_of_nodes_to_score: Some(args.percentage_of_nodes_to_score),
            max_bindings_in_flight: args.max_bindings_in_flight,
        },
    };
    let client = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let c = kube::Config::from_custom_kubeconfig(
                kc,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .with_context(|| format!("loading {}", path.display()))?;
            kube::Client::try_from(c)?
        }
        None => kube::Client::try_default().await.context("finding a kubeconfig")?,
    };
    if let Some(election) = &config.leader_election {
        election.validate()?;
    }
    tracing::info!(identity = %identity, leader_elect = args.leader_elect, "starting the scheduler");

    let stop = daemon::stop_on_signal("bindings in flight finish")?;
    scheduler::run(client, config, stop).await.context("scheduler")
}
