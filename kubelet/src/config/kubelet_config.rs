//! The kubelet's configuration: a subset of upstream's `KubeletConfiguration` (same YAML field
//! names, same defaults) read from `--config`, with command-line flags overriding it.
//!
//! Fields of upstream's schema that we do not implement yet are accepted and logged once; a valid
//! upstream config never fails to parse. Unknown fields are warned about, as upstream does.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::duration::GoDuration;
use crate::cm::allocatable::{NodeAllocatable, ReservationError, Reserved};
use crate::cm::node_config::{NodeConfig, NodeConfigError, NodeConfigInput};
use crate::eviction::config::{
    DEFAULT_PRESSURE_TRANSITION_PERIOD, EvictionConfig, SoftThresholds, parse_grace_periods,
    parse_minimum_reclaims,
};
use crate::eviction::{Signal, ThresholdError, ThresholdValue, Thresholds};
use crate::logs::{LogRotatePolicy, MaxSizeError};
use crate::nodeshutdown::ShutdownConfig;
use crate::runtime::images::gc::ImageGcPolicy;

/// Upstream's `KubeletConfiguration` fields this kubelet does not act on yet (accepted, logged).
const ACCEPTED_NOT_IMPLEMENTED: &[&str] = &[
    "clusterDNS",
    "clusterDomain",
    "resolvConf",
    "serializeImagePulls",
    "maxParallelImagePulls",
    "registryPullQPS",
    "registryBurst",
    "eventRecordQPS",
    "eventBurst",
    "kubeAPIQPS",
    "kubeAPIBurst",
    "rotateCertificates",
    "serverTLSBootstrap",
    "tlsCipherSuites",
    "tlsMinVersion",
    "enableServer",
    "enableDebuggingHandlers",
    "enableProfilingHandler",
    "enableContentionProfiling",
    "enableSystemLogHandler",
    "failSwapOn",
    "memorySwap",
    "featureGates",
    "cpuManagerPolicy",
    "memoryManagerPolicy",
    "topologyManagerPolicy",
    "volumeStatsAggPeriod",
    "volumePluginDir",
    "providerID",
    "protectKernelDefaults",
    "makeIPTablesUtilChains",
    "hairpinMode",
    "logging",
    "nodeStatusMaxImages",
    "imageServiceEndpoint",
    "localStorageCapacityIsolation",
    "seccompDefault",
    "registerNode",
    "registerWithTaints",
];

/// The config file as written: every field optional, unknown ones collected.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfigFile {
    pub kind: Option<String>,
    pub api_version: Option<String>,
    pub static_pod_path: Option<PathBuf>,
    /// Ours: the node-local ConfigMaps and Secrets static pods may reference.
    pub static_config_path: Option<PathBuf>,
    pub container_runtime_endpoint: Option<String>,
    pub file_check_frequency: Option<GoDuration>,
    /// The manifest URL and the headers sent with it (name → values), fetched every
    /// `httpCheckFrequency`.
    #[serde(rename = "staticPodURL")]
    pub static_pod_url: Option<String>,
    #[serde(rename = "staticPodURLHeader")]
    pub static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    pub http_check_frequency: Option<GoDuration>,
    pub sync_frequency: Option<GoDuration>,
    pub runtime_request_timeout: Option<GoDuration>,
    pub pod_logs_dir: Option<PathBuf>,
    pub max_pods: Option<u32>,
    pub cgroup_driver: Option<String>,
    pub cgroup_root: Option<String>,
    #[serde(rename = "cgroupsPerQOS")]
    pub cgroups_per_qos: Option<bool>,
    pub address: Option<IpAddr>,
    pub port: Option<u16>,
    pub read_only_port: Option<u16>,
    pub healthz_port: Option<u16>,
    pub healthz_bind_address: Option<IpAddr>,
    pub node_status_update_frequency: Option<GoDuration>,
    pub node_status_report_frequency: Option<GoDuration>,
    pub node_lease_duration_seconds: Option<u32>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub authentication: Option<AuthenticationFile>,
    pub authorization: Option<AuthorizationFile>,
    pub streaming_connection_idle_timeout: Option<GoDuration>,
    /// `evictionHard` as written: signal → threshold.
    pub eviction_hard: Option<BTreeMap<String, String>>,
    pub merge_default_eviction_settings: Option<bool>,
    /// `evictionSoft` (signal → threshold), `evictionSoftGracePeriod` (signal → duration),
    /// `evictionMinimumReclaim` (signal → amount) as written.
    pub eviction_soft: Option<BTreeMap<String, String>>,
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    pub eviction_minimum_reclaim: Option<BTreeMap<String, String>>,
    pub eviction_pressure_transition_period: Option<GoDuration>,
    pub eviction_max_pod_grace_period: Option<i32>,
    /// `systemReserved` and `kubeReserved` as written: resource → quantity.
    pub system_reserved: Option<BTreeMap<String, String>>,
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// Cgroups: what `kubepods` and the reserved cgroups are held to, the QoS classes' memory
    /// reservations, CFS quota and pod PID limits.
    pub enforce_node_allocatable: Option<Vec<String>>,
    pub system_reserved_cgroup: Option<String>,
    pub kube_reserved_cgroup: Option<String>,
    pub qos_reserved: Option<BTreeMap<String, String>>,
    /// Graceful node shutdown.
    pub shutdown_grace_period: Option<GoDuration>,
    pub shutdown_grace_period_critical_pods: Option<GoDuration>,
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: Option<bool>,
    #[serde(rename = "cpuCFSQuotaPeriod")]
    pub cpu_cfs_quota_period: Option<GoDuration>,
    pub pod_pids_limit: Option<i64>,
    /// Container log rotation.
    pub container_log_max_size: Option<String>,
    pub container_log_max_files: Option<u32>,
    pub container_log_max_workers: Option<u32>,
    pub container_log_monitor_interval: Option<GoDuration>,
    /// Image garbage collection.
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(rename = "imageMinimumGCAge")]
    pub image_minimum_gc_age: Option<GoDuration>,
    #[serde(rename = "imageMaximumGCAge")]
    pub image_maximum_gc_age: Option<GoDuration>,
    /// `crashLoopBackOff.maxContainerRestartPeriod` (upstream 1.32+).
    pub crash_loop_back_off: Option<CrashLoopBackOff>,
    /// Everything else: upstream fields we do not implement, and unknown ones.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `crashLoopBackOff`: the longest delay between restarts of a crashing container.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CrashLoopBackOff {
    pub max_container_restart_period: Option<GoDuration>,
}

/// `authentication`: who may call the kubelet API on `port`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationFile {
    pub x509: Option<X509File>,
    pub anonymous: Option<EnabledFile>,
    pub webhook: Option<WebhookAuthenticationFile>,
}

/// `authentication.webhook`: bearer tokens checked with the apiserver (TokenReview).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookAuthenticationFile {
    pub enabled: Option<bool>,
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: Option<GoDuration>,
}

/// `authorization`: what an authenticated caller of the kubelet API may do.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationFile {
    pub mode: Option<AuthorizationMode>,
    pub webhook: Option<WebhookAuthorizationFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookAuthorizationFile {
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: Option<GoDuration>,
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: Option<GoDuration>,
}

/// `authorization.mode`, upstream's two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum AuthorizationMode {
    /// Every authenticated caller may use every endpoint.
    AlwaysAllow,
    /// Each request is a SubjectAccessReview to the apiserver (`nodes/proxy` and friends).
    Webhook,
}

impl std::str::FromStr for AuthorizationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(Self::AlwaysAllow),
            "Webhook" => Ok(Self::Webhook),
            other => Err(format!("{other:?} is not an authorization mode (AlwaysAllow, Webhook)")),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct X509File {
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
pub struct EnabledFile {
    pub enabled: Option<bool>,
}

/// The effective configuration, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeletConfig {
    pub node_name: String,
    pub static_pod_path: Option<PathBuf>,
    /// The directory of node-local ConfigMaps and Secrets for static pods (`staticConfigPath`,
    /// ours; `None`: static pods may reference none).
    pub static_config_path: Option<PathBuf>,
    pub container_runtime_endpoint: String,
    pub file_check_frequency: Duration,
    /// The manifest URL source (`staticPodURL`, `--manifest-url`; `None`: none), the headers
    /// sent with it (`staticPodURLHeader`, `--manifest-url-header`), and how often it is
    /// fetched (`httpCheckFrequency`, `--http-check-frequency`).
    pub static_pod_url: Option<String>,
    pub static_pod_url_header: BTreeMap<String, Vec<String>>,
    pub http_check_frequency: Duration,
    pub sync_frequency: Duration,
    pub runtime_request_timeout: Duration,
    pub pod_logs_dir: PathBuf,
    pub root_dir: PathBuf,
    pub max_pods: u32,
    pub cgroup_driver: String,
    pub cgroup_root: String,
    pub cgroups_per_qos: bool,
    pub address: IpAddr,
    pub port: u16,
    pub read_only_port: u16,
    pub healthz_port: u16,
    pub healthz_bind_address: IpAddr,
    /// PLEG relist period (upstream's is fixed at 1 s).
    pub pleg_relist_period: Duration,
    /// The apiserver to join (`--kubeconfig`); absent, the kubelet runs standalone.
    pub kubeconfig: Option<PathBuf>,
    /// The address reported as the node's InternalIP (`--node-ip`; default: the outbound one).
    pub node_ip: Option<IpAddr>,
    /// How often node status is computed and, when it changed, posted.
    pub node_status_update_frequency: Duration,
    /// How often node status is posted even when unchanged.
    pub node_status_report_frequency: Duration,
    /// The node lease's duration; it is renewed every quarter of it.
    pub node_lease_duration_seconds: u32,
    /// The kubelet API's serving certificate and key (`tlsCertFile`, `tlsPrivateKeyFile`);
    /// absent, a self-signed one in `cert_dir`.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// Where the self-signed certificate lives (`--cert-dir`; default `<root_dir>/pki`).
    pub cert_dir: Option<PathBuf>,
    /// The CA that signs client certificates for the kubelet API
    /// (`authentication.x509.clientCAFile`, `--client-ca-file`).
    pub client_ca_file: Option<PathBuf>,
    /// Whether requests without a verified client certificate are served
    /// (`authentication.anonymous.enabled`, `--anonymous-auth`; upstream's config default: no).
    pub anonymous_auth: bool,
    /// Whether bearer tokens are checked with the apiserver (`authentication.webhook.enabled`,
    /// `--authentication-token-webhook`; upstream's config default: yes), and how long its
    /// answers are reused (`authentication.webhook.cacheTTL`). Standalone, there is nobody to
    /// ask, and token callers get 401.
    pub authentication_token_webhook: bool,
    pub authentication_token_webhook_cache_ttl: Duration,
    /// `authorization.mode` (`--authorization-mode`; upstream's config default: Webhook).
    pub authorization_mode: AuthorizationMode,
    /// How long the apiserver's yes (`authorization.webhook.cacheAuthorizedTTL`) and no
    /// (`cacheUnauthorizedTTL`) are reused.
    pub authorization_cache_authorized_ttl: Duration,
    pub authorization_cache_unauthorized_ttl: Duration,
    /// How long an exec or attach stream may pass no data either way before it is closed
    /// (`streamingConnectionIdleTimeout`, `--streaming-connection-idle-timeout`; 0: never).
    pub streaming_connection_idle_timeout: Duration,
    /// The hard eviction thresholds (`evictionHard`, `mergeDefaultEvictionSettings`;
    /// upstream's defaults when unset).
    pub eviction_hard: Thresholds,
    /// The soft thresholds and their grace periods (`evictionSoft`, `evictionSoftGracePeriod`,
    /// `--eviction-soft`, `--eviction-soft-grace-period`), each signal's minimum reclaim
    /// (`evictionMinimumReclaim`, `--eviction-minimum-reclaim`), how long a pressure condition
    /// outlasts its thresholds (`evictionPressureTransitionPeriod`; 0: upstream's 5m) and the
    /// longest grace a soft eviction gives a pod, in seconds (`evictionMaxPodGracePeriod`).
    pub eviction_soft: SoftThresholds,
    pub eviction_minimum_reclaim: BTreeMap<Signal, ThresholdValue>,
    pub eviction_pressure_transition_period: Duration,
    pub eviction_max_pod_grace_period: i32,
    /// What the system's and Kubernetes' daemons keep of the node (`systemReserved`,
    /// `kubeReserved`, `--system-reserved`, `--kube-reserved`).
    pub system_reserved: Reserved,
    pub kube_reserved: Reserved,
    /// The cgroup settings beyond the root (`enforceNodeAllocatable`, `None` for upstream's
    /// default `pods`; `systemReservedCgroup`, `kubeReservedCgroup`, `qosReserved`,
    /// `cpuCFSQuota`, `cpuCFSQuotaPeriod`, `podPidsLimit`), made a [`NodeConfig`] by
    /// [`KubeletConfig::node_config`].
    pub enforce_node_allocatable: Option<Vec<String>>,
    pub system_reserved_cgroup: Option<String>,
    pub kube_reserved_cgroup: Option<String>,
    pub qos_reserved: Option<BTreeMap<String, String>>,
    pub cpu_cfs_quota: Option<bool>,
    pub cpu_cfs_quota_period: Option<Duration>,
    pub pod_pids_limit: Option<i64>,
    /// Graceful node shutdown (`shutdownGracePeriod`, `shutdownGracePeriodCriticalPods`).
    pub shutdown: ShutdownConfig,
    /// When container logs are rotated and how many files each keeps (`containerLogMaxSize`,
    /// `containerLogMaxFiles`, `containerLogMaxWorkers`, `containerLogMonitorInterval`).
    pub container_log: LogRotatePolicy,
    /// When unused images are removed (`imageGCHighThresholdPercent`,
    /// `imageGCLowThresholdPercent`, `imageMinimumGCAge`, `imageMaximumGCAge`).
    pub image_gc: ImageGcPolicy,
    /// The longest crash back-off (`crashLoopBackOff.maxContainerRestartPeriod`, 1s to 300s).
    pub restart_backoff_max: Duration,
}

impl Default for KubeletConfig {
    /// Upstream's defaults for `kubelet.config.k8s.io/v1beta1`, with our manifest directory.
    fn default() -> Self {
        Self {
            node_name: String::new(),
            static_pod_path: Some(PathBuf::from("/etc/kubernetes/manifests")),
            static_config_path: Some(PathBuf::from("/etc/kubernetes/static-config")),
            container_runtime_endpoint: "unix:///run/containerd/containerd.sock".into(),
            file_check_frequency: Duration::from_secs(20),
            static_pod_url: None,
            static_pod_url_header: BTreeMap::new(),
            http_check_frequency: Duration::from_secs(20),
            sync_frequency: Duration::from_secs(60),
            runtime_request_timeout: Duration::from_secs(120),
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            root_dir: PathBuf::from("/var/lib/kubelet"),
            max_pods: 110,
            cgroup_driver: "cgroupfs".into(),
            cgroup_root: "/".into(),
            cgroups_per_qos: true,
            address: IpAddr::from([0, 0, 0, 0]),
            port: 10250,
            read_only_port: 0,
            healthz_port: 10248,
            healthz_bind_address: IpAddr::from([127, 0, 0, 1]),
            pleg_relist_period: Duration::from_secs(1),
            kubeconfig: None,
            node_ip: None,
            node_status_update_frequency: Duration::from_secs(10),
            node_status_report_frequency: Duration::from_secs(5 * 60),
            node_lease_duration_seconds: 40,
            tls_cert_file: None,
            tls_private_key_file: None,
            cert_dir: None,
            client_ca_file: None,
            anonymous_auth: false,
            authentication_token_webhook: true,
            authentication_token_webhook_cache_ttl: Duration::from_secs(2 * 60),
            authorization_mode: AuthorizationMode::Webhook,
            authorization_cache_authorized_ttl: Duration::from_secs(5 * 60),
            authorization_cache_unauthorized_ttl: Duration::from_secs(30),
            streaming_connection_idle_timeout: Duration::from_secs(4 * 60 * 60),
            eviction_hard: Thresholds::default(),
            eviction_soft: SoftThresholds::default(),
            eviction_minimum_reclaim: BTreeMap::new(),
            eviction_pressure_transition_period: DEFAULT_PRESSURE_TRANSITION_PERIOD,
            eviction_max_pod_grace_period: 0,
            system_reserved: Reserved::default(),
            kube_reserved: Reserved::default(),
            enforce_node_allocatable: None,
            system_reserved_cgroup: None,
            kube_reserved_cgroup: None,
            qos_reserved: None,
            cpu_cfs_quota: None,
            cpu_cfs_quota_period: None,
            pod_pids_limit: None,
            shutdown: ShutdownConfig::default(),
            container_log: LogRotatePolicy::default(),
            image_gc: ImageGcPolicy::default(),
            restart_backoff_max: crate::runtime::backoff::RESTART_MAX,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading kubelet config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("kubelet config {path}: {source}")]
    Parse { path: PathBuf, source: serde_yaml_ng::Error },
    #[error("kubelet config {path}: kind must be KubeletConfiguration, not {kind:?}")]
    Kind { path: PathBuf, kind: String },
    #[error(
        "kubelet config {path}: cgroupDriver {driver:?} is not supported: set cgroupDriver: cgroupfs or systemd (as the runtime's runc options: SystemdCgroup = true for systemd)"
    )]
    CgroupDriver { path: PathBuf, driver: String },
    #[error("kubelet config: {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("kubelet config {path}: {field}[{signal}]: {source}")]
    Eviction { path: PathBuf, field: &'static str, signal: String, source: ThresholdError },
    #[error("kubelet config: evictionSoft[{signal}]: {source}")]
    EvictionSoft { signal: Signal, source: ThresholdError },
    #[error("kubelet config {path}: containerLogMaxSize: {source}")]
    LogMaxSize { path: PathBuf, source: MaxSizeError },
    #[error("kubelet config {path}: {field}[{key}]: {source}")]
    Reserved { path: PathBuf, field: &'static str, key: String, source: ReservationError },
}

/// What a parsed file said beyond the fields we act on, for one log line each.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ConfigNotes {
    pub accepted_not_implemented: Vec<String>,
    pub unknown: Vec<String>,
}

impl KubeletConfig {
    /// How allocatable is made from the node's capacity.
    pub fn node_allocatable(&self) -> NodeAllocatable {
        NodeAllocatable {
            system: self.system_reserved.clone(),
            kube: self.kube_reserved.clone(),
            hard: self.eviction_hard.clone(),
        }
    }

    /// The container manager's settings, checked as upstream checks them.
    pub fn node_config(&self) -> Result<NodeConfig, NodeConfigError> {
        NodeConfig::parse(&NodeConfigInput {
            cgroup_root: &self.cgroup_root,
            cgroup_driver: &self.cgroup_driver,
            cgroups_per_qos: self.cgroups_per_qos,
            enforce_node_allocatable: self.enforce_node_allocatable.as_deref(),
            system_reserved_cgroup: self.system_reserved_cgroup.as_deref(),
            kube_reserved_cgroup: self.kube_reserved_cgroup.as_deref(),
            qos_reserved: self.qos_reserved.as_ref(),
            cpu_cfs_quota: self.cpu_cfs_quota,
            cpu_cfs_quota_period: self.cpu_cfs_quota_period,
            pod_pids_limit: self.pod_pids_limit,
        })
    }

    /// Every threshold the eviction manager watches and how it acts on them; refused when a
    /// soft threshold has no grace period.
    pub fn eviction(&self) -> Result<EvictionConfig, ConfigError> {
        let mut c = EvictionConfig::new(
            &self.eviction_hard,
            &self.eviction_soft,
            &self.eviction_minimum_reclaim,
        )
        .map_err(|(signal, source)| ConfigError::EvictionSoft { signal, source })?;
        c.pressure_transition_period = self.eviction_pressure_transition_period;
        c.max_pod_grace_period_seconds = i64::from(self.eviction_max_pod_grace_period);
        Ok(c)
    }

    /// Whether anyone can authenticate to the kubelet API without a token: a client CA names
    /// callers, or anonymous callers are served.
    pub fn api_callers_possible(&self) -> bool {
        self.client_ca_file.is_some() || self.anonymous_auth
    }

    /// `staticPodURLHeader` as sent: each name once per value, in order.
    pub fn static_pod_url_headers(&self) -> Vec<(String, String)> {
        let headers = &self.static_pod_url_header;
        headers.iter().flat_map(|(n, vs)| vs.iter().map(move |v| (n.clone(), v.clone()))).collect()
    }

    /// Checks what the rest of the kubelet relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid =
            |field, reason: &str| Err(ConfigError::Invalid { field, reason: reason.into() });
        if self.node_name.is_empty() {
            return invalid("nodeName", "empty (set --hostname-override)");
        }
        if api::validation::names::dns1123_subdomain(&self.node_name).is_some() {
            return invalid("nodeName", "must be a lowercase RFC 1123 subdomain");
        }
        if self.max_pods == 0 {
            return invalid("maxPods", "must be at least 1");
        }
        if self.file_check_frequency.is_zero() || self.sync_frequency.is_zero() {
            return invalid("fileCheckFrequency/syncFrequency", "must be positive");
        }
        if let Some(url) = &self.static_pod_url {
            if let Err(reason) = super::http::fetch::ManifestUrl::parse(url) {
                return invalid("staticPodURL", &format!("{url:?}: {reason}"));
            }
            if self.http_check_frequency.is_zero() {
                return invalid("httpCheckFrequency", "must be positive");
            }
        }
        if let Err(reason) = super::http::fetch::check_headers(&self.static_pod_url_header) {
            return invalid("staticPodURLHeader", &reason);
        }
        if self.node_status_update_frequency.is_zero() || self.node_lease_duration_seconds == 0 {
            return invalid(
                "nodeStatusUpdateFrequency/nodeLeaseDurationSeconds",
                "must be positive",
            );
        }
        if self.tls_cert_file.is_some() != self.tls_private_key_file.is_some() {
            return invalid("tlsCertFile/tlsPrivateKeyFile", "set both or neither");
        }
        let webhook = self.authorization_mode == AuthorizationMode::Webhook;
        if webhook && self.api_callers_possible() && self.port != 0 && self.kubeconfig.is_none() {
            return invalid(
                "authorization.mode",
                "Webhook asks the apiserver about each caller (SubjectAccessReview), and a standalone kubelet (no --kubeconfig) has none: set authorization.mode: AlwaysAllow to let every authenticated caller use the API, or join an apiserver",
            );
        }
        if let Err(e) = self.node_config() {
            return invalid(e.field, &e.reason);
        }
        if let Err((field, reason)) = self.shutdown.validate() {
            return invalid(field, &reason);
        }
        if let Err((field, reason)) = self.container_log.validate() {
            return invalid(field, &reason);
        }
        if let Err((field, reason)) = self.image_gc.validate() {
            return invalid(field, &reason);
        }
        self.eviction()?;
        let restart_max = self.restart_backoff_max;
        if !(Duration::from_secs(1)..=crate::runtime::backoff::RESTART_MAX).contains(&restart_max) {
            let reason = format!(
                "invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: {} seconds) must be set between 1s and 300s",
                restart_max.as_secs_f64()
            );
            return invalid("crashLoopBackOff.maxContainerRestartPeriod", &reason);
        }
        Ok(())
    }
}

mod file;

#[cfg(test)]
mod tests;
