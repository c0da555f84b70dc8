//! Serving a CRI implementation on a unix socket, as runtimes do.

use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;

use crate::cri::image_service_server::{ImageService, ImageServiceServer};
use crate::cri::runtime_service_server::{RuntimeService, RuntimeServiceServer};
use crate::error::ServeError;

/// Mode of the socket file: owner and group may connect, as containerd's `grpc.gid` setup.
pub const SOCKET_MODE: u32 = 0o660;

/// A bound CRI socket, not yet serving. Binding first lets a caller connect as soon as this
/// returns, with no race against the server task.
#[derive(Debug)]
pub struct BoundSocket {
    path: PathBuf,
    listener: UnixListener,
}

/// Binds `path`: creates its directory, removes a stale socket left by an earlier run (but never
/// a file that is not a socket), and sets mode [`SOCKET_MODE`].
pub fn bind(path: &Path) -> Result<BoundSocket, ServeError> {
    let io = |source| ServeError::Io { path: path.to_path_buf(), source };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path).map_err(io)?,
        Ok(_) => return Err(ServeError::NotASocket { path: path.to_path_buf() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let listener = UnixListener::bind(path).map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE)).map_err(io)?;
    Ok(BoundSocket { path: path.to_path_buf(), listener })
}

impl BoundSocket {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves both CRI services until `shutdown` completes, then removes the socket file.
    pub async fn serve<R, I>(
        self,
        runtime: R,
        images: I,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServeError>
    where
        R: RuntimeService,
        I: ImageService,
    {
        let Self { path, listener } = self;
        let result = tonic::transport::Server::builder()
            .add_service(RuntimeServiceServer::new(runtime))
            .add_service(ImageServiceServer::new(images))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
            .await
            .map_err(|source| ServeError::Transport { path: path.clone(), source });
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::debug!(path = %path.display(), error = %e, "socket already gone at shutdown");
        }
        result
    }
}
