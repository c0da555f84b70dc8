//! `kubelet`: parses upstream's flags (and `--config`), sets up logging, runs, and on SIGTERM or
//! SIGINT stops cleanly, leaving pods running.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use kubelet::config::kubelet_config::{KubeletConfig, KubeletConfigFile};

/// A Kubernetes node agent: runs static pods from a manifest directory through a CRI runtime.
/// Flags follow upstream's kubelet; flags override the config file.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// A KubeletConfiguration file (kubelet.config.k8s.io/v1beta1).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The node's name (default: the hostname).
    #[arg(long, visible_alias = "node-name")]
    hostname_override: Option<String>,
    /// The CRI endpoint, e.g. unix:///run/containerd/containerd.sock.
    #[arg(long)]
    container_runtime_endpoint: Option<String>,
    /// The kubelet's state directory (pod volumes).
    #[arg(long)]
    root_dir: Option<PathBuf>,
    /// The static pod directory (upstream's deprecated flag for staticPodPath).
    #[arg(long)]
    pod_manifest_path: Option<PathBuf>,
    /// URL for accessing additional Pod specifications to run (staticPodURL): a v1 Pod, PodList
    /// or List, fetched every --http-check-frequency.
    #[arg(long)]
    manifest_url: Option<String>,
    /// Comma-separated list of HTTP headers to use when accessing the url provided to
    /// --manifest-url (staticPodURLHeader). Multiple headers with the same name will be added
    /// in the same order provided. This flag can be repeatedly invoked. For example:
    /// --manifest-url-header 'a:hello,b:again,c:world' --manifest-url-header 'b:beautiful'
    #[arg(long, value_parser = colon_pairs)]
    manifest_url_header: Vec<ColonPairs>,
    /// Duration between checking http for new data (httpCheckFrequency; default 20s).
    #[arg(long)]
    http_check_frequency: Option<kubelet::config::duration::GoDuration>,
    /// The directory of node-local ConfigMaps and Secrets static pods may reference
    /// (staticConfigPath; ours; "" disables it).
    #[arg(long)]
    static_config_path: Option<PathBuf>,
    /// The read-only API port (0 disables it).
    #[arg(long)]
    read_only_port: Option<u16>,
    /// The healthz port (0 disables it).
    #[arg(long)]
    healthz_port: Option<u16>,
    /// The address the kubelet API and the read-only API listen on.
    #[arg(long)]
    address: Option<std::net::IpAddr>,
    /// The kubelet API's port (TLS; logs and exec; 0 disables it).
    #[arg(long)]
    port: Option<u16>,
    /// The kubelet API's serving certificate (default: self-signed in --cert-dir).
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The key of --tls-cert-file.
    #[arg(long)]
    tls_private_key_file: Option<PathBuf>,
    /// Where the self-signed serving certificate is kept (default: <root-dir>/pki).
    #[arg(long)]
    cert_dir: Option<PathBuf>,
    /// The CA whose client certificates may call the kubelet API (the apiserver's).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// Serve kubelet API requests that carry no verified client certificate.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    anonymous_auth: Option<bool>,
    /// Who may use the kubelet API: Webhook (ask the apiserver per caller) or AlwaysAllow.
    #[arg(long)]
    authorization_mode: Option<kubelet::config::kubelet_config::AuthorizationMode>,
    /// Check bearer tokens with the apiserver (TokenReview).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    authentication_token_webhook: Option<bool>,
    /// How long an exec or attach stream may be idle before it is closed (e.g. 4h0m0s; 0: never).
    #[arg(long)]
    streaming_connection_idle_timeout: Option<kubelet::config::duration::GoDuration>,
    /// The cgroup under which pod cgroups are created.
    #[arg(long)]
    cgroup_root: Option<String>,
    /// Whether each QoS class and pod gets a cgroup of its own under <cgroup-root>/kubepods.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    cgroups_per_qos: Option<bool>,
    /// What is held to allocatable: pods, system-reserved, kube-reserved (and their
    /// -compressible forms) or none, comma-separated; "" for nothing (enforceNodeAllocatable).
    #[arg(long, value_delimiter = ',')]
    enforce_node_allocatable: Option<Vec<String>>,
    /// A kubeconfig for the apiserver to join; without it the kubelet runs standalone.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The address to report as the node's InternalIP (default: the outbound interface's).
    #[arg(long)]
    node_ip: Option<std::net::IpAddr>,
    /// Hard eviction thresholds, replacing evictionHard, e.g.
    /// memory.available<100Mi,nodefs.available<10% (0% or 100%: the signal is off).
    #[arg(long, value_parser = kubelet::eviction::statements)]
    eviction_hard: Option<std::collections::BTreeMap<String, String>>,
    /// Soft eviction thresholds, replacing evictionSoft, in --eviction-hard's form; each needs
    /// a grace period.
    #[arg(long, value_parser = kubelet::eviction::statements)]
    eviction_soft: Option<std::collections::BTreeMap<String, String>>,
    /// How long each soft threshold must be met before pods are evicted, replacing
    /// evictionSoftGracePeriod, e.g. memory.available=1m30s.
    #[arg(long, value_parser = key_values)]
    eviction_soft_grace_period: Option<std::collections::BTreeMap<String, String>>,
    /// How much more than its threshold must be free before a pressure is over, replacing
    /// evictionMinimumReclaim, e.g. memory.available=0Mi,nodefs.available=500Mi.
    #[arg(long, value_parser = key_values)]
    eviction_minimum_reclaim: Option<std::collections::BTreeMap<String, String>>,
    /// How long a pressure condition stays after its thresholds were last met (default 5m0s).
    #[arg(long)]
    eviction_pressure_transition_period: Option<kubelet::config::duration::GoDuration>,
    /// The longest grace period, in seconds, a soft eviction gives a pod (negative: as 0).
    #[arg(long, allow_hyphen_values = true)]
    eviction_max_pod_grace_period: Option<i32>,
    /// Resources kept for the system's daemons, replacing systemReserved, e.g.
    /// cpu=500m,memory=1Gi,ephemeral-storage=1Gi,pid=1000.
    #[arg(long, value_parser = key_values)]
    system_reserved: Option<std::collections::BTreeMap<String, String>>,
    /// Resources kept for Kubernetes' daemons (the kubelet, the runtime), replacing
    /// kubeReserved, in the same form.
    #[arg(long, value_parser = key_values)]
    kube_reserved: Option<std::collections::BTreeMap<String, String>>,
    /// The size (e.g. 10Mi) at which a container's log is rotated; negative: never.
    #[arg(long, allow_hyphen_values = true)]
    container_log_max_size: Option<String>,
    /// The most log files a container keeps, the current one included (at least 2).
    #[arg(long)]
    container_log_max_files: Option<u32>,
    /// The percent of the image filesystem's use at which image garbage collection starts
    /// (100: never).
    #[arg(long)]
    image_gc_high_threshold: Option<i32>,
    /// The percent of use image garbage collection frees down to.
    #[arg(long)]
    image_gc_low_threshold: Option<i32>,
    #[command(flatten)]
    log: daemon::LogArgs,
}

/// A `name=value,name=value` flag as a map, as upstream's `ConfigurationMap`.
fn key_values(flag: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    flag.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => Err(format!("missing value in {pair:?} (expected name=value)")),
        })
        .collect()
}

/// One `--manifest-url-header` value: `key:value` pairs, comma-separated.
#[derive(Debug, Clone)]
struct ColonPairs(Vec<(String, String)>);

/// Upstream's `ColonSeparatedMultimapStringString`.
fn colon_pairs(flag: &str) -> Result<ColonPairs, String> {
    flag.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once(':') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => Err("malformed pair, expect string:string".to_string()),
        })
        .collect::<Result<_, _>>()
        .map(ColonPairs)
}

fn main() -> anyhow::Result<()> {
    kubelet::heap::tune();
    raise_open_files_limit();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init();

    let mut config = KubeletConfig {
        node_name: kubelet::kubelet::default_node_name(),
        ..KubeletConfig::default()
    };
    if let Some(path) = &args.config {
        let file = KubeletConfigFile::read(path)?;
        let notes = file.notes();
        if !notes.accepted_not_implemented.is_empty() {
            tracing::info!(fields = ?notes.accepted_not_implemented, "config fields accepted but not implemented yet");
        }
        if !notes.unknown.is_empty() {
            tracing::warn!(fields = ?notes.unknown, file = %path.display(), "unknown config fields ignored");
        }
        file.apply(&mut config);
    }
    macro_rules! flag {
        ($($arg:ident => $field:ident),*) => { $( if let Some(v) = args.$arg.clone() { config.$field = v.into(); } )* };
    }
    flag!(hostname_override => node_name, container_runtime_endpoint => container_runtime_endpoint, root_dir => root_dir);
    flag!(read_only_port => read_only_port, healthz_port => healthz_port, address => address, cgroup_root => cgroup_root);
    if let Some(per_qos) = args.cgroups_per_qos {
        config.cgroups_per_qos = per_qos;
    }
    if let Some(keys) = &args.enforce_node_allocatable {
        config.enforce_node_allocatable = Some(
            keys.iter().filter(|k| !k.trim().is_empty()).map(|k| k.trim().to_string()).collect(),
        );
    }
    if let Some(p) = args.port {
        config.port = p;
    }
    for (arg, field) in [
        (&args.tls_cert_file, &mut config.tls_cert_file),
        (&args.tls_private_key_file, &mut config.tls_private_key_file),
        (&args.cert_dir, &mut config.cert_dir),
        (&args.client_ca_file, &mut config.client_ca_file),
    ] {
        if let Some(p) = arg {
            *field = Some(p.clone());
        }
    }
    if let Some(a) = args.anonymous_auth {
        config.anonymous_auth = a;
    }
    if let Some(w) = args.authentication_token_webhook {
        config.authentication_token_webhook = w;
    }
    if let Some(mode) = args.authorization_mode {
        config.authorization_mode = mode;
    }
    if let Some(idle) = args.streaming_connection_idle_timeout {
        config.streaming_connection_idle_timeout = idle.0;
    }
    config.kubeconfig = args.kubeconfig.clone();
    config.node_ip = args.node_ip;
    if let Some(p) = args.pod_manifest_path.clone() {
        config.static_pod_path = Some(p);
    }
    if let Some(url) = &args.manifest_url {
        config.static_pod_url = (!url.is_empty()).then(|| url.clone());
    }
    if !args.manifest_url_header.is_empty() {
        config.static_pod_url_header.clear();
        for (name, value) in args.manifest_url_header.iter().flat_map(|p| p.0.iter()) {
            config.static_pod_url_header.entry(name.clone()).or_default().push(value.clone());
        }
    }
    if let Some(d) = args.http_check_frequency {
        config.http_check_frequency = d.0;
    }
    if let Some(p) = args.static_config_path.clone() {
        config.static_config_path = (!p.as_os_str().is_empty()).then_some(p);
    }
    if let Some(hard) = &args.eviction_hard {
        config.eviction_hard = kubelet::eviction::Thresholds::parse(hard, false)
            .map_err(|(signal, e)| anyhow::anyhow!("--eviction-hard: {signal}: {e}"))?;
    }
    if let Some(soft) = &args.eviction_soft {
        config.eviction_soft.values = kubelet::eviction::Thresholds::parse(soft, false)
            .map_err(|(signal, e)| anyhow::anyhow!("--eviction-soft: {signal}: {e}"))?;
    }
    if let Some(periods) = &args.eviction_soft_grace_period {
        config.eviction_soft.grace_periods =
            kubelet::eviction::config::parse_grace_periods(periods).map_err(|(signal, e)| {
                anyhow::anyhow!("--eviction-soft-grace-period: {signal}: {e}")
            })?;
    }
    if let Some(reclaims) = &args.eviction_minimum_reclaim {
        config.eviction_minimum_reclaim = kubelet::eviction::config::parse_minimum_reclaims(
            reclaims,
        )
        .map_err(|(signal, e)| anyhow::anyhow!("--eviction-minimum-reclaim: {signal}: {e}"))?;
    }
    if let Some(d) = args.eviction_pressure_transition_period {
        config.eviction_pressure_transition_period = if d.0.is_zero() {
            kubelet::eviction::config::DEFAULT_PRESSURE_TRANSITION_PERIOD
        } else {
            d.0
        };
    }
    if let Some(s) = args.eviction_max_pod_grace_period {
        config.eviction_max_pod_grace_period = s;
    }
    for (flag, map, target) in [
        ("--system-reserved", &args.system_reserved, &mut config.system_reserved),
        ("--kube-reserved", &args.kube_reserved, &mut config.kube_reserved),
    ] {
        if let Some(map) = map {
            *target = kubelet::cm::allocatable::Reserved::parse(map)
                .map_err(|(key, e)| anyhow::anyhow!("{flag}: {key}: {e}"))?;
        }
    }
    if let Some(size) = &args.container_log_max_size {
        config.container_log.max_size = kubelet::logs::LogRotatePolicy::parse_max_size(size)
            .map_err(|e| anyhow::anyhow!("--container-log-max-size: {e}"))?;
    }
    if let Some(n) = args.container_log_max_files {
        config.container_log.max_files = n;
    }
    if let Some(p) = args.image_gc_high_threshold {
        config.image_gc.high_threshold_percent = p;
    }
    if let Some(p) = args.image_gc_low_threshold {
        config.image_gc.low_threshold_percent = p;
    }
    config.node_name = config.node_name.to_lowercase();

    let stop = daemon::stop_on_signal("pods keep running")?;
    kubelet::run(config, stop).await.context("kubelet")
}

/// Raises the soft limit on open files to the hard one, as Go's runtime does for upstream's
/// kubelet: the stats keep the pods' cgroup control files open between scrapes (seven a pod),
/// which a soft limit of 1,024 would cut to a quarter of it.
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        eprintln!("kubelet: raising the open files limit from {soft} to {hard}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_url_headers_are_read_as_upstreams_colon_separated_multimap() {
        let args = Args::try_parse_from([
            "kubelet",
            "--manifest-url=http://127.0.0.1:8080/pods",
            "--manifest-url-header",
            "a:hello,b:again, c : world",
            "--manifest-url-header=b:beautiful,,",
            "--http-check-frequency=5s",
        ])
        .map_err(|e| e.to_string());
        let Ok(args) = args else { panic!("{args:?}") };
        let pairs: Vec<(String, String)> =
            args.manifest_url_header.iter().flat_map(|p| p.0.clone()).collect();
        let want = [("a", "hello"), ("b", "again"), ("c", "world"), ("b", "beautiful")];
        let want: Vec<(String, String)> =
            want.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(pairs, want);
        assert_eq!(args.http_check_frequency.map(|d| d.0), Some(std::time::Duration::from_secs(5)));
        let err = Args::try_parse_from(["kubelet", "--manifest-url-header=novalue"]).unwrap_err();
        assert!(err.to_string().contains("malformed pair, expect string:string"), "{err}");
    }
}
