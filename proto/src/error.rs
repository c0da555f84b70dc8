//! Errors of the CRI transport. Each names the endpoint; call errors name the RPC too.

use std::path::PathBuf;
use std::time::Duration;

/// A runtime endpoint string that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("runtime endpoint is empty")]
    Empty,
    #[error("runtime endpoint {endpoint:?}: scheme {scheme:?} is not supported, use unix:///path")]
    UnsupportedScheme { endpoint: String, scheme: String },
    #[error("runtime endpoint {endpoint:?}: the socket path must be absolute")]
    NotAbsolute { endpoint: String },
}

/// Why [`crate::CriClient::connect`] could not reach a CRI v1 runtime.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("CRI endpoint {endpoint}: no socket at {path} (is the container runtime running?)")]
    SocketMissing { endpoint: String, path: PathBuf },
    #[error("CRI endpoint {endpoint}: {path} exists but is not a unix socket")]
    NotASocket { endpoint: String, path: PathBuf },
    #[error("CRI endpoint {endpoint}: connection refused (stale socket, runtime not listening)")]
    Refused { endpoint: String, source: std::io::Error },
    #[error("CRI endpoint {endpoint}: cannot connect: {source}")]
    Io { endpoint: String, source: std::io::Error },
    #[error("CRI endpoint {endpoint}: no answer to {stage} within {timeout:?}")]
    Timeout { endpoint: String, stage: &'static str, timeout: Duration },
    #[error("CRI endpoint {endpoint} is not a CRI v1 runtime: {reason}")]
    NotCri { endpoint: String, reason: String },
    #[error(
        "CRI endpoint {endpoint}: runtime {runtime} reports CRI API {version:?}, but v1 is required"
    )]
    WrongVersion { endpoint: String, runtime: String, version: String },
}

/// A CRI call that failed: the runtime's gRPC status, or our own deadline.
#[derive(Debug, thiserror::Error)]
#[error("CRI {rpc} on {endpoint}: {kind}")]
pub struct CallError {
    pub rpc: &'static str,
    pub endpoint: String,
    pub kind: CallErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum CallErrorKind {
    #[error("{}: {}", .0.code(), .0.message())]
    Status(tonic::Status),
    #[error("no answer within {0:?}")]
    DeadlineExceeded(Duration),
}

impl CallError {
    /// The gRPC code, with our own deadline reported as `DeadlineExceeded`.
    pub fn code(&self) -> tonic::Code {
        match &self.kind {
            CallErrorKind::Status(s) => s.code(),
            CallErrorKind::DeadlineExceeded(_) => tonic::Code::DeadlineExceeded,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == tonic::Code::NotFound
    }

    /// The runtime's own message (empty for our deadline).
    pub fn message(&self) -> &str {
        match &self.kind {
            CallErrorKind::Status(s) => s.message(),
            CallErrorKind::DeadlineExceeded(_) => "",
        }
    }
}

/// Why a CRI server could not be served on a unix socket.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot serve CRI on {path}: it exists and is not a socket (refusing to remove it)")]
    NotASocket { path: PathBuf },
    #[error("cannot serve CRI on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("CRI server on {path} failed: {source}")]
    Transport { path: PathBuf, source: tonic::transport::Error },
}
