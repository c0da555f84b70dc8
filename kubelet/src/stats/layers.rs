//! The containers' writable layers, which only the runtime knows (CRI `ListContainerStats`),
//! for summaries made from the pods' cgroups ([`super::cgroup`]).
//!
//! Asking costs the runtime a call to every container's shim: about 0.2 s at 110 pods on
//! containerd 1.6 (BENCHMARKS.md), while the rest of a summary takes milliseconds. So the
//! summary API answers with the figures taken at most [`MAX_AGE`] ago — older ones are
//! answered once more while a refresh runs in the background, as cAdvisor refreshes its disk
//! usage behind upstream's summary — and only the eviction manager, ranking pods by what they
//! use now, waits for fresh ones ([`Want::Now`]). The runtime's own figures are up to 10 s old
//! anyway (containerd reads snapshot usage every 10 s).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use proto::{CallError, CriClient, cri};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// How old the figures the summary API answers with may be before a refresh starts.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// The writable layer of each container, by container ID.
pub type Layers = HashMap<String, cri::FilesystemUsage>;

/// How fresh the caller needs the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Asked of the runtime now (the eviction manager's ranking).
    Now,
    /// The last ones taken; a refresh started in the background once they are [`MAX_AGE`] old
    /// (the summary API). The first ask waits for the runtime.
    Recent,
}

#[derive(Debug, Default)]
struct State {
    taken: Option<(Instant, Arc<Layers>)>,
    refreshing: bool,
}

/// The last figures taken, and the background refreshes, owned by the kubelet's task tracker.
#[derive(Debug, Clone)]
pub struct WritableLayers {
    cri: CriClient,
    state: Arc<Mutex<State>>,
    tasks: TaskTracker,
    max_age: Duration,
}

impl WritableLayers {
    pub fn new(cri: CriClient, tasks: TaskTracker) -> Self {
        Self::with_max_age(cri, tasks, MAX_AGE)
    }

    pub fn with_max_age(cri: CriClient, tasks: TaskTracker, max_age: Duration) -> Self {
        Self { cri, state: Arc::default(), tasks, max_age }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub async fn get(&self, want: Want) -> Result<Arc<Layers>, CallError> {
        if want == Want::Recent {
            let mut state = self.lock();
            if let Some((at, layers)) = state.taken.clone() {
                if at.elapsed() >= self.max_age && !state.refreshing && !self.tasks.is_closed() {
                    state.refreshing = true;
                    let me = self.clone();
                    self.tasks.spawn(async move {
                        if let Err(error) = me.take().await {
                            tracing::debug!(%error, "refreshing the writable layers' figures");
                        }
                    });
                }
                return Ok(layers);
            }
        }
        self.take().await
    }

    /// Asks the runtime and keeps the answer (a failure keeps the figures there were).
    async fn take(&self) -> Result<Arc<Layers>, CallError> {
        let asked = self.cri.list_container_stats(cri::ListContainerStatsRequest { filter: None });
        let answer = asked.await;
        let mut state = self.lock();
        state.refreshing = false;
        let layers: Layers = answer?
            .stats
            .into_iter()
            .filter_map(|s| Some((s.attributes?.id, s.writable_layer?)))
            .collect();
        let layers = Arc::new(layers);
        state.taken = Some((Instant::now(), layers.clone()));
        Ok(layers)
    }
}

#[cfg(test)]
mod tests {
    use fake_cri::{FakeCriServer, Rpc, Usage};
    use proto::ClientOptions;

    use super::*;

    async fn rig() -> (tempfile::TempDir, FakeCriServer, CriClient, String) {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        fake.runtime().add_image("busybox:1.35").unwrap();
        let cri = CriClient::connect(fake.endpoint(), ClientOptions::default()).await.unwrap();
        let sandbox = crate::test_cri::sandbox(&cri, "web", None).await;
        let c = crate::test_cri::container(&cri, &sandbox, "c", "busybox:1.35", true).await;
        (dir, fake, cri, c)
    }

    fn layer_bytes(fake: &FakeCriServer, id: &str, bytes: u64) {
        let usage = Usage { writable_layer_bytes: bytes, ..Default::default() };
        assert!(fake.runtime().set_usage(id, usage));
    }

    fn used(layers: &Layers, id: &str) -> Option<u64> {
        layers.get(id)?.used_bytes.as_ref().map(|v| v.value)
    }

    /// Polls (bounded) until `f` holds.
    async fn until(what: &str, f: impl Fn() -> bool) {
        for _ in 0..200 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what}: not within 2 s");
    }

    #[tokio::test]
    async fn the_summary_api_is_answered_from_recent_figures_refreshed_behind_it() {
        let (_dir, fake, cri, c) = rig().await;
        let tasks = TaskTracker::new();
        let layers = WritableLayers::with_max_age(cri, tasks.clone(), Duration::from_millis(200));
        layer_bytes(&fake, &c, 100);
        let calls = || fake.runtime().calls(Rpc::ListContainerStats);

        // The first ask waits for the runtime; the next ones are answered from it.
        assert_eq!(used(&layers.get(Want::Recent).await.unwrap(), &c), Some(100));
        layer_bytes(&fake, &c, 200);
        assert_eq!(used(&layers.get(Want::Recent).await.unwrap(), &c), Some(100));
        assert_eq!(calls(), 1);

        // Once old, they are answered once more while one refresh runs.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(used(&layers.get(Want::Recent).await.unwrap(), &c), Some(100));
        until("the refresh", || calls() == 2).await;
        until("the refreshed figures", || {
            layers.lock().taken.as_ref().is_some_and(|(_, l)| used(l, &c) == Some(200))
        })
        .await;
        assert_eq!(used(&layers.get(Want::Recent).await.unwrap(), &c), Some(200));
        assert_eq!(calls(), 2);
        tasks.close();
        tasks.wait().await;
    }

    #[tokio::test]
    async fn the_eviction_manager_gets_fresh_figures_and_a_failure_keeps_the_last() {
        let (_dir, fake, cri, c) = rig().await;
        let layers = WritableLayers::new(cri, TaskTracker::new());
        layer_bytes(&fake, &c, 100);
        assert_eq!(used(&layers.get(Want::Recent).await.unwrap(), &c), Some(100));
        layer_bytes(&fake, &c, 300);
        assert_eq!(used(&layers.get(Want::Now).await.unwrap(), &c), Some(300));

        fake.runtime().fail_next(Rpc::ListContainerStats, tonic::Status::unavailable("restarting"));
        assert!(layers.get(Want::Now).await.is_err());
        assert_eq!(used(&layers.get(Want::Recent).await.unwrap(), &c), Some(300));
    }
}
