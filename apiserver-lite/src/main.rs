//! `apiserver-lite`: parses upstream's kube-apiserver flags, opens the store, makes the PKI on
//! first start, serves, and stops on SIGTERM or SIGINT.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use apiserver_lite::admission::{self, Admission};
use apiserver_lite::auth::node::graph::Graph;
use apiserver_lite::auth::node::populator;
use apiserver_lite::auth::rbac::{self, Rbac};
use apiserver_lite::auth::{Authenticator, Authorizer, Mode, ServiceAccountTokens};
use apiserver_lite::http::ApiState;
use apiserver_lite::http::proxy::{AddressTypes, KubeletClient};
use apiserver_lite::metrics::{Metrics, scraper};
use apiserver_lite::registry::Registry;
use apiserver_lite::registry::versioner;
use apiserver_lite::serviceaccount::keys::{PublicKey, SigningKey, public_keys_from_file};
use apiserver_lite::serviceaccount::{self, openid};
use apiserver_lite::storage::Store;
use apiserver_lite::storage::etcd::{EtcdConfig, KeyLayout, Remote};
use apiserver_lite::storage::sqlite::SqliteBackend;
use apiserver_lite::{certs, identity, resources, server};
use clap::Parser;
use tokio_util::sync::CancellationToken;

/// jemalloc, not glibc's malloc: each request allocates and frees many short-lived buffers (the
/// body, its JSON tree, the typed object, the stored encoding, TLS records), and glibc spent about
/// a fifth of the server's CPU during creates in `malloc`/`free` and in consolidating its fast
/// bins before each larger allocation. Measured in BENCHMARKS.md ("A new machine, watches by
/// name, and jemalloc"): 14 % less CPU per concurrent create and 21 % less RSS at 10,000 pods.
/// SQLite's own allocations stay with the C library.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A Kubernetes API server for small clusters: kubectl and client libraries work against it.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The HTTPS port.
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// The address to serve HTTPS on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// Where the generated CA, serving and admin certificates live (made on first start).
    #[arg(long, default_value = "/var/lib/apiserver-lite/pki")]
    cert_dir: PathBuf,
    /// A serving certificate to use instead of the generated one.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// CA that signs client certificates (default: the generated CA).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// Bearer tokens, upstream's CSV: token,user,uid,"group1,group2".
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// etcd endpoints (comma separated URLs); absent, the embedded SQLite store under
    /// --data-dir is used.
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
    /// The etcd key prefix every object is stored under.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// The CA that signs etcd's serving certificate.
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// The client certificate shown to etcd.
    #[arg(long, requires = "etcd_keyfile")]
    etcd_certfile: Option<PathBuf>,
    #[arg(long, requires = "etcd_certfile")]
    etcd_keyfile: Option<PathBuf>,
    /// How often the store's history is compacted (0 never): over etcd, one apiserver of those
    /// sharing it compacts each round.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    etcd_compaction_interval: std::time::Duration,
    /// The embedded store's directory (apiserver-lite's addition).
    #[arg(long, default_value = "/var/lib/apiserver-lite")]
    data_dir: PathBuf,
    /// Extra names and addresses for the serving certificate (comma separated).
    #[arg(long, value_delimiter = ',')]
    tls_san: Vec<String>,
    /// Plain HTTP on 127.0.0.1 with no authentication (every request is an admin): for local
    /// development only; 0 disables it.
    #[arg(long, default_value_t = 0)]
    insecure_port: u16,
    /// The audit policy (audit.k8s.io/v1 Policy): which requests are logged, at which level.
    /// Without it nothing is audited.
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Where audit events go, one JSON line each (`-`: standard output). Without it nothing is
    /// audited.
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// Megabytes the audit log may reach before it is rotated (0: 100).
    #[arg(long, default_value_t = 0)]
    audit_log_maxsize: u64,
    /// Rotated audit logs kept (0: all).
    #[arg(long, default_value_t = 0)]
    audit_log_maxbackup: usize,
    /// Days a rotated audit log is kept (0: no limit).
    #[arg(long, default_value_t = 0)]
    audit_log_maxage: u64,
    /// Where to write the admin kubeconfig (default: <cert-dir>/admin.kubeconfig).
    #[arg(long)]
    admin_kubeconfig: Option<PathBuf>,
    /// The client certificate shown to kubelets for logs and exec (default: the generated
    /// <cert-dir>/apiserver-kubelet-client.crt, kube-apiserver-kubelet-client in system:masters).
    #[arg(long, requires = "kubelet_client_key")]
    kubelet_client_certificate: Option<PathBuf>,
    #[arg(long, requires = "kubelet_client_certificate")]
    kubelet_client_key: Option<PathBuf>,
    /// The CA that signs kubelets' serving certificates; without it they are not verified (as
    /// upstream).
    #[arg(long)]
    kubelet_certificate_authority: Option<PathBuf>,
    /// The node address types tried, in order, to reach a kubelet.
    #[arg(long, value_delimiter = ',', default_value = "InternalIP,ExternalIP,Hostname")]
    kubelet_preferred_address_types: Vec<String>,
    /// The `tolerationSeconds` of the `node.kubernetes.io/not-ready:NoExecute` toleration
    /// added to every pod that has none (DefaultTolerationSeconds admission).
    #[arg(long, default_value_t = 300)]
    default_not_ready_toleration_seconds: i64,
    /// The same for `node.kubernetes.io/unreachable:NoExecute`.
    #[arg(long, default_value_t = 300)]
    default_unreachable_toleration_seconds: i64,
    /// Admission plugins to run beside the default ones (all of apiserver-lite's are on by
    /// default: DefaultTolerationSeconds, ServiceAccount); comma separated.
    #[arg(long, value_delimiter = ',')]
    enable_admission_plugins: Vec<String>,
    /// Admission plugins not to run, of those on by default; comma separated.
    #[arg(long, value_delimiter = ',')]
    disable_admission_plugins: Vec<String>,
    /// The `iss` of service-account tokens (the first; every one given is accepted).
    #[arg(long, default_value = serviceaccount::DEFAULT_ISSUER)]
    service_account_issuer: Vec<String>,
    /// The private key (PEM: RSA, or EC P-256/P-384) service-account tokens are signed with
    /// (default: <cert-dir>/sa.key, an EC P-256 key made on first start).
    #[arg(long)]
    service_account_signing_key_file: Option<PathBuf>,
    /// PEM files of the keys service-account tokens are verified with (public keys,
    /// certificates or private keys; repeatable; default: the signing key).
    #[arg(long)]
    service_account_key_file: Vec<PathBuf>,
    /// The audiences of the API: tokens must be for one of them (default: the first issuer).
    #[arg(long, value_delimiter = ',')]
    api_audiences: Vec<String>,
    /// The longest token a TokenRequest gets (longer requests are shortened); 0: no limit.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    service_account_max_token_expiration: std::time::Duration,
    /// Pods' admission-made tokens (asked for 3607 s) are valid a year, warned about after
    /// the hour, so a cluster moving to bound tokens keeps working.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    service_account_extend_token_expiration: bool,
    /// The `jwks_uri` of the issuer's discovery document (default:
    /// https://<the address clients reach>/openid/v1/jwks).
    #[arg(long)]
    service_account_jwks_uri: Option<String>,
    /// The authorizers asked, in order (the first to allow or deny decides): Node, RBAC,
    /// AlwaysAllow; comma separated. Members of system:masters are always allowed.
    #[arg(long, value_delimiter = ',', default_value = "Node,RBAC")]
    authorization_mode: Vec<String>,
    /// How often kubelets' resource metrics are scraped for `metrics.k8s.io` (`kubectl top`),
    /// as metrics-server's flag; at least 1s.
    #[arg(long, default_value = "15s", value_parser = resolution)]
    metric_resolution: std::time::Duration,
    #[command(flatten)]
    log: daemon::LogArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init();
    let audit = auditor(&args)?;
    let store = Arc::new(open_store(&args).await?);
    let admission = Admission {
        default_not_ready_toleration_seconds: args.default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds: args.default_unreachable_toleration_seconds,
        plugins: admission::plugins(
            &args.enable_admission_plugins,
            &args.disable_admission_plugins,
        )?,
    };
    let registry = Arc::new(Registry::new(store.clone()).with_admission(admission));
    registry
        .bootstrap()
        .await
        .map_err(|e| anyhow::anyhow!("creating the initial namespaces: {e}"))?;
    let modes = Mode::parse_list(&args.authorization_mode)?;
    rbac::reconcile::bootstrap(&registry)
        .await
        .map_err(|e| anyhow::anyhow!("reconciling the bootstrap RBAC policy: {e}"))?;
    let rbac = Arc::new(Rbac::default());
    rbac::aggregation::settle(&rbac, &registry).await;
    // The node graph as of now, before serving; the task below follows the store from here.
    let graph = Arc::new(Graph::default());
    let graph_revision = populator::load(&graph, &store);
    let authz = Authorizer::new(modes, rbac.clone()).with_graph(graph.clone());

    let host = nix_hostname();
    let mut sans = vec![
        "localhost".to_string(),
        "127.0.0.1".into(),
        "::1".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
    ];
    sans.extend(host.clone());
    if !args.bind_address.is_unspecified() {
        sans.push(args.bind_address.to_string());
    }
    sans.extend(args.tls_san.iter().cloned());
    let pki = certs::ensure(&args.cert_dir, &sans)?;
    let (cert, key) = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(c), Some(k)) => (
            std::fs::read_to_string(c).context("--tls-cert-file")?,
            std::fs::read_to_string(k).context("--tls-private-key-file")?,
        ),
        _ => (pki.server_cert.clone(), pki.server_key.clone()),
    };
    let client_ca = match &args.client_ca_file {
        Some(f) => std::fs::read_to_string(f).context("--client-ca-file")?,
        None => pki.ca_cert.clone(),
    };
    let auth = match &args.token_auth_file {
        Some(f) => Authenticator::from_token_file(f)?,
        None => Authenticator::default(),
    };
    let issuer = Arc::new(token_issuer(&args)?);
    let tls = server::tls_config(&cert, &key, Some(&client_ca))?;
    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let listener = server::bind(addr).await?;
    let local = listener.local_addr()?;
    let reach = if args.bind_address.is_unspecified() {
        format!("127.0.0.1:{}", local.port())
    } else {
        local.to_string()
    };
    let kubeconfig =
        args.admin_kubeconfig.clone().unwrap_or_else(|| args.cert_dir.join("admin.kubeconfig"));
    certs::write_admin_kubeconfig(&pki, &format!("https://{reach}"), &kubeconfig)?;
    certs::write_component_kubeconfigs(&pki, &format!("https://{reach}"))?;
    let (kubelet_cert, kubelet_key) =
        match (&args.kubelet_client_certificate, &args.kubelet_client_key) {
            (Some(c), Some(k)) => (
                std::fs::read_to_string(c).context("--kubelet-client-certificate")?,
                std::fs::read_to_string(k).context("--kubelet-client-key")?,
            ),
            _ => (pki.kubelet_client_cert.clone(), pki.kubelet_client_key.clone()),
        };
    let kubelet_ca = match &args.kubelet_certificate_authority {
        Some(f) => Some(std::fs::read_to_string(f).context("--kubelet-certificate-authority")?),
        None => None,
    };
    let kubelet = KubeletClient::new(
        &kubelet_cert,
        &kubelet_key,
        kubelet_ca.as_deref(),
        AddressTypes(args.kubelet_preferred_address_types.clone()),
    )
    .context("the kubelet client")?;
    let verification = verification_keys(&args, &issuer)?;
    let auth = auth.with_service_accounts(ServiceAccountTokens {
        issuers: args.service_account_issuer.clone(),
        keys: verification.clone(),
        api_audiences: issuer.api_audiences.clone(),
        objects: registry.clone(),
    });
    let jwks_uri = args
        .service_account_jwks_uri
        .clone()
        .unwrap_or_else(|| format!("https://{reach}{}", openid::JWKS_PATH));
    let openid = match openid::Discovery::new(&issuer.issuer, &jwks_uri, &verification) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(error = %e, "not serving the service-account issuer's discovery documents");
            None
        }
    };
    let metrics = Arc::new(Metrics::new(args.metric_resolution));
    let state = Arc::new(ApiState {
        registry: registry.clone(),
        auth,
        authz,
        address: reach.clone(),
        kubelet: kubelet.clone(),
        tokens: Some(issuer),
        openid,
        audit,
        metrics: metrics.clone(),
    });

    let stop = daemon::stop_on_signal("in-flight requests and watches end")?;
    let tasks = tokio_util::task::TaskTracker::new();
    tasks.spawn(registry.clone().run_namespace_controller(stop.clone()));
    if !args.etcd_compaction_interval.is_zero() {
        tasks.spawn(compact_periodically(
            store.clone(),
            args.etcd_compaction_interval,
            stop.clone(),
        ));
    }
    tasks.spawn(rbac.run(registry.clone(), stop.clone()));
    let lease_host = host.clone().unwrap_or_else(|| "localhost".into());
    tasks.spawn(identity::run(registry.clone(), lease_host, local.port(), stop.clone()));
    tasks.spawn(populator::run(graph, store, graph_revision, stop.clone()));
    tasks.spawn(scraper::run(metrics, registry.clone(), kubelet.clone(), stop.clone()));
    if args.insecure_port != 0 {
        let insecure = server::bind(SocketAddr::from(([127, 0, 0, 1], args.insecure_port))).await?;
        tracing::warn!(
            port = args.insecure_port,
            "serving plain HTTP on 127.0.0.1 with no authentication"
        );
        tasks.spawn(server::serve_insecure(insecure, state.clone(), stop.clone()));
    }
    tasks.spawn(server::serve_tls(listener, tls, state, stop.clone()));
    tracing::info!(%local, kubeconfig = %kubeconfig.display(), "apiserver-lite serving");

    stop.cancelled().await;
    kubelet.stop.cancel();
    tasks.close();
    kubelet.streams.close();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        tasks.wait().await;
        kubelet.streams.wait().await;
    })
    .await;
    Ok(())
}

/// `--metric-resolution`: a duration of at least a second.
fn resolution(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d < std::time::Duration::from_secs(1) {
        return Err(format!(
            "metric-resolution should be a time duration at least 1s, but value {s} provided"
        ));
    }
    Ok(d)
}

/// The token issuer from the flags: the signing key (made on first start when no file is
/// named), the issuer, the audiences, the expiration policy.
fn token_issuer(args: &Args) -> anyhow::Result<serviceaccount::Issuer> {
    let key = match &args.service_account_signing_key_file {
        Some(f) => SigningKey::from_file(f).context("--service-account-signing-key-file")?,
        None => {
            std::fs::create_dir_all(&args.cert_dir)
                .with_context(|| format!("creating {}", args.cert_dir.display()))?;
            SigningKey::load_or_generate(&args.cert_dir.join("sa.key"))
                .context("the service-account signing key")?
        }
    };
    let issuer = match args.service_account_issuer.as_slice() {
        [first, ..] if !first.is_empty() => first.clone(),
        _ => anyhow::bail!("--service-account-issuer must not be empty"),
    };
    let max = args.service_account_max_token_expiration.as_secs();
    if max != 0 && !(3600..=1 << 32).contains(&max) {
        anyhow::bail!(
            "--service-account-max-token-expiration must be between 1 hour and 2^32 seconds"
        );
    }
    let api_audiences = if args.api_audiences.is_empty() {
        vec![issuer.clone()]
    } else {
        args.api_audiences.clone()
    };
    Ok(serviceaccount::Issuer {
        issuer,
        api_audiences,
        key,
        extend_expiration: args.service_account_extend_token_expiration,
        max_expiration_seconds: i64::try_from(max).ok().filter(|m| *m > 0),
    })
}

/// The keys tokens are verified with: every `--service-account-key-file`, or the signing key.
fn verification_keys(
    args: &Args,
    issuer: &serviceaccount::Issuer,
) -> anyhow::Result<Vec<PublicKey>> {
    if args.service_account_key_file.is_empty() {
        return Ok(vec![issuer.key.public().clone()]);
    }
    let mut keys = Vec::new();
    for f in &args.service_account_key_file {
        keys.extend(public_keys_from_file(f).context("--service-account-key-file")?);
    }
    if !keys.contains(issuer.key.public()) {
        tracing::warn!(
            kid = %issuer.key.public().kid,
            "the service-account signing key is not among --service-account-key-file: the tokens this server issues will not authenticate"
        );
    }
    Ok(keys)
}

fn nix_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// The store: over etcd with `--etcd-servers`, else the embedded SQLite file.
async fn open_store(args: &Args) -> anyhow::Result<Store> {
    if args.etcd_servers.is_empty() {
        let backend = SqliteBackend::open(&args.data_dir.join("state.db"))
            .with_context(|| format!("opening the store in {}", args.data_dir.display()))?;
        return Ok(Store::open(Arc::new(backend))?);
    }
    let config = EtcdConfig {
        servers: args.etcd_servers.clone(),
        prefix: args.etcd_prefix.clone(),
        ca_file: args.etcd_cafile.clone(),
        cert_file: args.etcd_certfile.clone(),
        key_file: args.etcd_keyfile.clone(),
    };
    let layout = KeyLayout::new(&config.prefix, resources::etcd_routes());
    let remote = Remote::connect(&config, layout, versioner::set_resource_version).await?;
    let store = Store::open_etcd(remote).await?;
    tracing::info!(servers = %config.servers.join(","), prefix = %config.prefix, revision = store.revision(), "the store follows etcd");
    Ok(store)
}

/// Trims the store's history every `interval` (over etcd, compacts it).
async fn compact_periodically(
    store: Arc<Store>,
    interval: std::time::Duration,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(interval);
    every.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {
                if let Err(e) = store.compact().await {
                    tracing::warn!(error = %e, "compaction");
                }
            }
        }
    }
}

/// The audit policy and log, when both are given (as upstream: a policy without a log, or a
/// log without a policy, audits nothing). A policy that does not parse stops the start.
fn auditor(args: &Args) -> anyhow::Result<Option<Arc<apiserver_lite::audit::Auditor>>> {
    use apiserver_lite::audit::{Auditor, Log, Policy, Rotation};
    let policy = args.audit_policy_file.as_deref().map(Policy::load).transpose()?;
    match (policy, &args.audit_log_path) {
        (Some(policy), Some(path)) => {
            let rotation = Rotation::new(
                args.audit_log_maxsize,
                args.audit_log_maxbackup,
                args.audit_log_maxage,
            );
            let log = Log::open(path, rotation)?;
            tracing::info!(path = %path.display(), "audit log");
            Ok(Some(Arc::new(Auditor::new(policy, log))))
        }
        (Some(_), None) => {
            tracing::warn!("--audit-policy-file without --audit-log-path: nothing is audited");
            Ok(None)
        }
        (None, _) => Ok(None),
    }
}
