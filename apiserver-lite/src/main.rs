//! `apiserver-lite`: parses upstream's kube-apiserver flags, opens the store, makes the PKI on
//! first start, serves, and stops on SIGTERM or SIGINT.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use apiserver_lite::admission::Admission;
use apiserver_lite::auth::Authenticator;
use apiserver_lite::http::ApiState;
use apiserver_lite::http::proxy::{AddressTypes, KubeletClient};
use apiserver_lite::registry::Registry;
use apiserver_lite::storage::Store;
use apiserver_lite::storage::sqlite::SqliteBackend;
use apiserver_lite::{certs, server};
use clap::Parser;
use tokio_util::sync::CancellationToken;

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
    /// etcd endpoints; absent, the embedded SQLite store under --data-dir is used.
    #[arg(long)]
    etcd_servers: Option<String>,
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
    #[command(flatten)]
    log: daemon::LogArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init();
    if args.etcd_servers.is_some() {
        anyhow::bail!(
            "--etcd-servers: the etcd backend is not implemented yet; omit it to use the embedded SQLite store"
        );
    }
    let backend = SqliteBackend::open(&args.data_dir.join("state.db"))
        .with_context(|| format!("opening the store in {}", args.data_dir.display()))?;
    let store = Arc::new(Store::open(Arc::new(backend))?);
    let admission = Admission {
        default_not_ready_toleration_seconds: args.default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds: args.default_unreachable_toleration_seconds,
    };
    let registry = Arc::new(Registry::new(store.clone()).with_admission(admission));
    registry
        .bootstrap()
        .await
        .map_err(|e| anyhow::anyhow!("creating the initial namespaces: {e}"))?;

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
    let state = Arc::new(ApiState {
        registry: registry.clone(),
        auth,
        address: reach.clone(),
        kubelet: kubelet.clone(),
    });

    let stop = daemon::stop_on_signal("in-flight requests and watches end")?;
    let tasks = tokio_util::task::TaskTracker::new();
    tasks.spawn(registry.clone().run_namespace_controller(stop.clone()));
    tasks.spawn(compact_periodically(store, stop.clone()));
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

fn nix_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Trims the store's history every five minutes.
async fn compact_periodically(store: Arc<Store>, stop: CancellationToken) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(300));
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
