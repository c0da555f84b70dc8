//! The flags every command takes (kubectl's `ConfigFlags` and its global flags).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct ConfigFlags {
    /// Path to the kubeconfig file to use for CLI requests.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The name of the kubeconfig cluster to use.
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// The name of the kubeconfig user to use.
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// If present, the namespace scope for this CLI request.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The address and port of the Kubernetes API server.
    #[arg(short = 's', long, global = true)]
    pub server: Option<String>,
    /// Bearer token for authentication to the API server.
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// Path to a cert file for the certificate authority.
    #[arg(long, global = true)]
    pub certificate_authority: Option<PathBuf>,
    /// Path to a client certificate file for TLS.
    #[arg(long, global = true)]
    pub client_certificate: Option<PathBuf>,
    /// Path to a client key file for TLS.
    #[arg(long, global = true)]
    pub client_key: Option<PathBuf>,
    /// If true, the server's certificate will not be checked for validity.
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// The length of time to wait before giving up on a single server request (`0`: none).
    #[arg(long, global = true, value_parser = crate::config::parse_timeout)]
    pub request_timeout: Option<Duration>,
    /// Username to impersonate for the operation.
    #[arg(long = "as", global = true)]
    pub impersonate: Option<String>,
    /// Group to impersonate for the operation (repeatable).
    #[arg(long = "as-group", global = true)]
    pub impersonate_groups: Vec<String>,
    /// A kubelet's API (`https://127.0.0.1:10250`) to read instead of an API server: node
    /// mode, for a node with no control plane (get pods|manifests|events, logs).
    #[arg(long, global = true)]
    pub kubelet: Option<String>,
    /// Number for the log level verbosity (6 and above show each HTTP request).
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0)]
    pub verbosity: u8,
}
