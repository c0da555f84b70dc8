use std::sync::Mutex;
use std::time::SystemTime;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::io::AsyncReadExt;

use super::*;
use crate::nodeshutdown::logind::InhibitLock;

/// logind as the manager sees it: a delay that a reload takes from the override file, locks
/// that are pipes (the test holds the read ends: EOF once the kubelet lets go), and the
/// `PrepareForShutdown` signals the test sends.
#[derive(Debug)]
struct FakeLogind {
    delay: Mutex<Duration>,
    conf_dir: PathBuf,
    /// The read end of each lock handed out.
    locks: Mutex<Vec<tokio::net::unix::pipe::Receiver>>,
    events: Mutex<Option<mpsc::UnboundedReceiver<bool>>>,
}

impl Logind for FakeLogind {
    fn inhibit_delay_max(&self) -> BoxFuture<'_, Result<Duration, LogindError>> {
        Box::pin(async move { Ok(*self.delay.lock().unwrap()) })
    }

    fn inhibit(&self) -> BoxFuture<'_, Result<InhibitLock, LogindError>> {
        Box::pin(async move {
            let (tx, rx) = tokio::net::unix::pipe::pipe().unwrap();
            self.locks.lock().unwrap().push(rx);
            Ok(InhibitLock::from_fd(tx.into_blocking_fd().unwrap()))
        })
    }

    fn reload(&self) -> BoxFuture<'_, Result<(), LogindError>> {
        Box::pin(async move {
            let text = std::fs::read_to_string(self.conf_dir.join("99-kubelet.conf")).unwrap();
            let secs: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix("InhibitDelayMaxSec="))
                .and_then(|v| v.parse().ok())
                .unwrap();
            *self.delay.lock().unwrap() = Duration::from_secs_f64(secs);
            Ok(())
        })
    }

    fn shutdown_events(&self) -> BoxFuture<'_, Result<BoxStream<'static, bool>, LogindError>> {
        Box::pin(async move {
            let rx = self.events.lock().unwrap().take();
            Ok(match rx {
                Some(rx) => tokio_stream::wrappers::UnboundedReceiverStream::new(rx).boxed(),
                None => futures::stream::pending().boxed(),
            })
        })
    }
}

fn pod(uid: &str, priority: Option<i32>) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            uid: Some(uid.into()),
            name: Some(uid.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            priority,
            termination_grace_period_seconds: Some(30),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn running() -> PodStatus {
    PodStatus { phase: Some("Running".into()), ..Default::default() }
}

struct Rig {
    manager: ShutdownManager,
    logind: Arc<FakeLogind>,
    events: mpsc::UnboundedSender<bool>,
    evictions: mpsc::Receiver<Eviction>,
    shutting_down: watch::Receiver<bool>,
    statuses: Arc<StatusManager>,
    _dir: tempfile::TempDir,
}

fn rig(delay: Duration) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let logind = Arc::new(FakeLogind {
        delay: Mutex::new(delay),
        conf_dir: dir.path().join("logind.conf.d"),
        locks: Mutex::new(Vec::new()),
        events: Mutex::new(Some(events_rx)),
    });
    let statuses = Arc::new(StatusManager::default());
    for (uid, priority) in [("web", None), ("batch", Some(10)), ("dns", Some(2_000_000_000))] {
        statuses.set_pod(pod(uid, priority));
        statuses.set_status(uid, running(), SystemTime::now());
    }
    let (evictions_tx, evictions_rx) = mpsc::channel(8);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let manager = ShutdownManager {
        config: ShutdownConfig {
            grace_period: Duration::from_secs(30),
            critical_grace_period: Duration::from_secs(10),
        },
        logind: logind.clone(),
        logind_conf_dir: dir.path().join("logind.conf.d"),
        statuses: statuses.clone(),
        evictions: evictions_tx,
        recorder: Recorder::default(),
        node: "n1".into(),
        shutting_down: shutdown_tx,
    };
    Rig {
        manager,
        logind,
        events: events_tx,
        evictions: evictions_rx,
        shutting_down: shutdown_rx,
        statuses,
        _dir: dir,
    }
}

/// Whether the lock handed out `i`-th has been released (its write end closed).
async fn released(logind: &FakeLogind, i: usize) -> bool {
    let mut rx = logind.locks.lock().unwrap().remove(i);
    let mut buf = [0u8; 1];
    let eof = matches!(
        tokio::time::timeout(Duration::from_millis(50), rx.read(&mut buf)).await,
        Ok(Ok(0))
    );
    logind.locks.lock().unwrap().insert(i, rx);
    eof
}

#[tokio::test]
async fn a_short_logind_delay_is_raised_through_the_override_before_the_lock_is_taken() {
    let r = rig(Duration::from_secs(5));
    let _lock = r.manager.start().await.unwrap();
    assert_eq!(*r.logind.delay.lock().unwrap(), Duration::from_secs(30));
    assert_eq!(r.logind.locks.lock().unwrap().len(), 1, "one lock held");

    // A logind that ignores the override (its drop-in directory is elsewhere): refused, in
    // upstream's words.
    #[derive(Debug)]
    struct Stubborn(FakeLogind);
    impl Logind for Stubborn {
        fn inhibit_delay_max(&self) -> BoxFuture<'_, Result<Duration, LogindError>> {
            self.0.inhibit_delay_max()
        }
        fn inhibit(&self) -> BoxFuture<'_, Result<InhibitLock, LogindError>> {
            self.0.inhibit()
        }
        fn reload(&self) -> BoxFuture<'_, Result<(), LogindError>> {
            Box::pin(async { Ok(()) })
        }
        fn shutdown_events(&self) -> BoxFuture<'_, Result<BoxStream<'static, bool>, LogindError>> {
            self.0.shutdown_events()
        }
    }
    let mut r = rig(Duration::from_secs(5));
    let stubborn = FakeLogind {
        delay: Mutex::new(Duration::from_secs(5)),
        conf_dir: r.manager.logind_conf_dir.clone(),
        locks: Mutex::new(Vec::new()),
        events: Mutex::new(None),
    };
    r.manager.logind = Arc::new(Stubborn(stubborn));
    let err = r.manager.start().await.unwrap_err().to_string();
    assert_eq!(
        err,
        "node shutdown manager was unable to update logind InhibitDelayMaxSec to 30s (ShutdownGracePeriod), current value of InhibitDelayMaxSec (5s) is less than requested ShutdownGracePeriod"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_stops_regular_pods_then_critical_ones_and_then_releases_the_lock() {
    let mut r = rig(Duration::from_secs(60));
    let lock = r.manager.start().await.unwrap();
    let statuses = r.statuses.clone();
    let logind = r.logind.clone();
    let stop = CancellationToken::new();
    let run = tokio::spawn(r.manager.run(lock, stop.clone()));
    assert!(!released(&logind, 0).await);

    r.events.send(true).unwrap();
    // The regular group: both pods, each with the group's 20 s (their own 30 s is longer).
    let mut first = Vec::new();
    for _ in 0..2 {
        let e = r.evictions.recv().await.unwrap();
        assert_eq!(e.failure.reason, "Terminated");
        assert_eq!(e.failure.message, "Pod was terminated in response to imminent node shutdown.");
        assert_eq!(e.failure.disruption.as_deref(), Some("TerminationByKubelet"));
        first.push((e.uid, e.grace));
    }
    first.sort();
    let s = Duration::from_secs;
    assert_eq!(first, vec![("batch".to_string(), s(20)), ("web".to_string(), s(20))]);
    assert!(*r.shutting_down.borrow(), "the node says it is shutting down");
    // Critical pods wait while the regular ones stop.
    tokio::time::sleep(s(5)).await;
    assert!(r.evictions.try_recv().is_err(), "dns waits for the regular group");
    for uid in ["batch", "web"] {
        let failed = PodStatus { phase: Some("Failed".into()), ..Default::default() };
        statuses.set_status(uid, failed, SystemTime::now());
    }
    let dns = r.evictions.recv().await.unwrap();
    assert_eq!((dns.uid.as_str(), dns.grace), ("dns", s(10)));
    assert!(!released(&logind, 0).await, "held while the critical pod stops");
    // It never finishes: the group's 10 s end the wait, and the machine may go.
    tokio::time::sleep(s(11)).await;
    assert!(released(&logind, 0).await, "released once every group was waited for");

    // A cancelled shutdown: the node is back and holds a new lock.
    r.events.send(false).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!*r.shutting_down.borrow());
    assert_eq!(logind.locks.lock().unwrap().len(), 2, "a new lock");
    assert!(!released(&logind, 1).await);
    stop.cancel();
    run.await.unwrap();
}
