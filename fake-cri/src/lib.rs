//! `fake-cri`: an in-memory CRI v1 runtime served on a real unix socket.
//!
//! It is the kubelet's test double, the way upstream tests against a fake runtime service. It
//! keeps sandboxes and containers with containerd's state machine, exit codes, timestamps, list
//! filters, log files and event stream, but **it runs no containers**: what a container "does"
//! is described by a [`Program`].
//!
//! - [`FakeRuntime`]: the runtime and the knobs tests turn (programs, exits, faults, delays).
//! - [`FakeCriServer`]: the runtime served on a socket, with a stop path.
//! - `store`: sandbox and container records and their lifecycle.
//! - `runtime`: the CRI operations on the store.
//! - `images`: the image store and reference normalisation.
//! - `ipam`: pod addresses from a subnet ([`PodCidr`]), as CNI's host-local hands them out.
//! - `records`: records by id with truncated-id lookup and a label index.
//! - `service`: the gRPC trait implementations (faults, then the operation).
//! - `logs`: CRI-format log lines.
//! - `import`: pods another kubelet made, replayed from `crictl inspectp`/`inspect` output.
//! - `stats`: `ListContainerStats` and `ListPodSandboxStats` from the [`Usage`] tests set.

mod images;
mod import;
mod ipam;
mod logs;
mod program;
mod records;
mod rpc;
mod runtime;
mod service;
mod stats;
mod store;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use proto::UnixEndpoint;
use proto::cri;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use images::{ImageRef, InvalidRef};
pub use import::{CapturedContainer, CapturedPod, ImportError, Imported, read_crictl};
pub use ipam::{InvalidCidr, PodCidr};
pub use logs::rfc3339_nanos;
pub use program::{ExecHandler, ExecOutcome, Match, OnSigterm, Program, Stream};
pub use rpc::Rpc;
pub use stats::Usage;

/// How many container events a slow `GetContainerEvents` reader may fall behind before it
/// misses some.
const EVENT_BUFFER: usize = 1024;

/// The fake runtime. Clones share state.
#[derive(Debug, Clone)]
pub struct FakeRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Mutex<store::Store>,
    images: Mutex<images::ImageStore>,
    programs: Mutex<program::Programs>,
    faults: Mutex<rpc::Faults>,
    events: broadcast::Sender<cri::ContainerEventResponse>,
    /// Exit timers and event forwarders; cancelled and awaited by [`FakeRuntime::shutdown`].
    tasks: TaskTracker,
    cancel: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for FakeRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeRuntime {
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        Self {
            inner: Arc::new(Inner {
                store: Mutex::default(),
                images: Mutex::default(),
                programs: Mutex::default(),
                faults: Mutex::default(),
                events,
                tasks: TaskTracker::new(),
                cancel: CancellationToken::new(),
            }),
        }
    }

    /// Containers matching `matcher` behave as `program` from their next start on.
    pub fn set_program(&self, matcher: Match, program: Program) {
        lock(&self.inner.programs).add(matcher, program);
    }

    /// Decides what `ExecSync` returns. Without a handler every command exits 0 silently.
    pub fn set_exec_handler(
        &self,
        handler: impl Fn(&str, &[String]) -> ExecOutcome + Send + Sync + 'static,
    ) {
        lock(&self.inner.programs).set_exec(Arc::new(handler));
    }

    /// Makes a running container (id or unique prefix) exit now with `code`. False if it was not
    /// running.
    pub fn exit_container(&self, id: &str, code: i32) -> bool {
        self.finish(id, code)
    }

    /// The next call of `rpc` fails with `status` (queued: several calls fail in turn).
    pub fn fail_next(&self, rpc: Rpc, status: tonic::Status) {
        lock(&self.inner.faults).push_failure(rpc, status);
    }

    /// Every call of `rpc` waits `delay` before it is answered; `None` removes the delay.
    pub fn set_delay(&self, rpc: Rpc, delay: Option<Duration>) {
        lock(&self.inner.faults).set_delay(rpc, delay);
    }

    /// How many calls of `rpc` arrived (including failed ones).
    pub fn calls(&self, rpc: Rpc) -> u64 {
        lock(&self.inner.faults).calls(rpc)
    }

    /// Sandboxes started from now on get their addresses from `cidr` (default containerd's
    /// `10.88.0.0/16`); give each runtime its own subnet when several serve one cluster.
    pub fn set_pod_cidr(&self, cidr: PodCidr) {
        lock(&self.inner.store).ipam.set_cidr(cidr);
    }

    /// Puts an image in the store as if it had been pulled.
    pub fn add_image(&self, reference: &str) -> Result<(), InvalidRef> {
        let r = ImageRef::parse(reference)?;
        lock(&self.inner.images).insert(&r);
        Ok(())
    }

    /// Pulls of this repository fail from now on, as from a registry that lacks it.
    pub fn refuse_pulls_of(&self, reference: &str) -> Result<(), InvalidRef> {
        let r = ImageRef::parse(reference)?;
        lock(&self.inner.images).refuse(&r);
        Ok(())
    }

    /// Pulls from registry `domain` (`127.0.0.1:5000`, `docker.io`) need `username` and
    /// `password` from now on, as from a registry with basic authentication.
    pub fn require_auth(&self, domain: &str, username: &str, password: &str) {
        lock(&self.inner.images).protect(domain, username, password);
    }

    /// From now on container `id` (or a unique prefix) reports `usage` in CRI stats. False if
    /// there is no such container.
    pub fn set_usage(&self, id: &str, usage: Usage) -> bool {
        let mut store = lock(&self.inner.store);
        let Some(id) = store.containers.resolve(id).map(str::to_string) else { return false };
        store.containers.get_mut(&id).map(|c| c.usage = usage).is_some()
    }

    /// Every container, in any state (what `crictl ps -a` shows).
    pub fn containers(&self) -> Vec<cri::Container> {
        lock(&self.inner.store).list_containers(None)
    }

    /// Every sandbox, in any state (what `crictl pods` shows).
    pub fn sandboxes(&self) -> Vec<cri::PodSandbox> {
        lock(&self.inner.store).list_sandboxes(None)
    }

    /// Stops exit timers and event streams and waits for them.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }
}

/// A [`FakeRuntime`] served on a unix socket.
#[derive(Debug)]
pub struct FakeCriServer {
    runtime: FakeRuntime,
    endpoint: UnixEndpoint,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), proto::ServeError>>,
}

impl FakeCriServer {
    /// Binds `socket` (replacing a stale socket) and serves a new runtime on it. The socket
    /// accepts connections as soon as this returns.
    pub fn start(socket: &Path) -> Result<Self, proto::ServeError> {
        Self::start_with(FakeRuntime::new(), socket)
    }

    /// Serves `runtime` on `socket`.
    pub fn start_with(runtime: FakeRuntime, socket: &Path) -> Result<Self, proto::ServeError> {
        let bound = proto::server::bind(socket)?;
        let stop = CancellationToken::new();
        let (svc, token) = (runtime.clone(), stop.clone());
        let task =
            tokio::spawn(
                async move { bound.serve(svc.clone(), svc, token.cancelled_owned()).await },
            );
        Ok(Self { runtime, endpoint: UnixEndpoint::new(socket), stop, task })
    }

    pub fn runtime(&self) -> &FakeRuntime {
        &self.runtime
    }

    pub fn endpoint(&self) -> &UnixEndpoint {
        &self.endpoint
    }

    /// Ends event streams, stops serving, removes the socket.
    pub async fn shutdown(self) -> Result<(), proto::ServeError> {
        self.runtime.shutdown().await;
        self.stop.cancel();
        match self.task.await {
            Ok(result) => result,
            Err(join) => std::panic::resume_unwind(join.into_panic()),
        }
    }
}
