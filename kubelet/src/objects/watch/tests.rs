use std::collections::BTreeMap;

use super::*;
use crate::objects::ObjectKind;

/// Watches whose states the test sends.
#[derive(Debug, Default)]
struct FakeWatcher {
    streams: Mutex<BTreeMap<ObjectKey, mpsc::UnboundedSender<Option<Object>>>>,
    started: Mutex<Vec<ObjectKey>>,
}

impl FakeWatcher {
    fn send(&self, key: &ObjectKey, state: Option<Object>) {
        let streams = self.streams.lock().unwrap();
        streams[key].send(state).expect("the watch is running");
    }

    /// Whether the watch of `key` was dropped (its stream's receiver is gone).
    fn stopped(&self, key: &ObjectKey) -> bool {
        self.streams.lock().unwrap().get(key).is_none_or(|tx| tx.is_closed())
    }

    fn starts(&self) -> usize {
        self.started.lock().unwrap().len()
    }
}

impl ObjectWatcher for FakeWatcher {
    fn watch(&self, key: &ObjectKey) -> BoxStream<'static, Option<Object>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.streams.lock().unwrap().insert(key.clone(), tx);
        self.started.lock().unwrap().push(key.clone());
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx).boxed()
    }
}

fn pod(uid: &str, config_maps: &[&str]) -> Pod {
    let env: Vec<serde_json::Value> = config_maps
        .iter()
        .map(|n| serde_json::json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": n, "key": "k"}}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {"containers": [{"name": "c", "env": env}]},
    }))
    .unwrap()
}

fn cm(name: &str, version: &str, immutable: bool) -> Option<Object> {
    let cm = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
        "data": {"k": version},
        "immutable": immutable,
    }))
    .unwrap();
    Some(Object::ConfigMap(Arc::new(cm)))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(ObjectKind::ConfigMap, "ns", name)
}

struct Setup {
    watcher: Arc<FakeWatcher>,
    manager: WatchBasedManager,
    changes: mpsc::UnboundedReceiver<Vec<String>>,
}

fn setup() -> Setup {
    let watcher = Arc::new(FakeWatcher::default());
    let (tx, changes) = mpsc::unbounded_channel();
    let manager =
        WatchBasedManager::new(watcher.clone(), tx, TaskTracker::new(), CancellationToken::new());
    Setup { watcher, manager, changes }
}

/// Lets the spawned watch tasks run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn one_watch_per_object_kept_while_a_pod_references_it() {
    let s = setup();
    s.manager.register_pod(&pod("a", &["shared", "only-a"]));
    s.manager.register_pod(&pod("b", &["shared"]));
    settle().await;
    assert_eq!(s.watcher.starts(), 2, "one watch per object, not per pod");
    assert_eq!(s.manager.watched(), [key("only-a"), key("shared")].into());
    s.manager.unregister_pod("a");
    settle().await;
    assert!(s.watcher.stopped(&key("only-a")), "dropped with its last pod");
    assert!(!s.watcher.stopped(&key("shared")), "b still references it");
    // An update that stops referencing it drops it too.
    s.manager.register_pod(&pod("b", &["other"]));
    settle().await;
    assert!(s.watcher.stopped(&key("shared")));
    assert_eq!(s.manager.watched(), [key("other")].into());
}

#[tokio::test]
async fn reads_see_the_latest_state_and_a_missing_object_is_not_found() {
    let s = setup();
    s.manager.register_pod(&pod("a", &["x"]));
    settle().await;
    s.watcher.send(&key("x"), None);
    settle().await;
    let err = s.manager.get(&key("x")).await.unwrap_err();
    assert_eq!(err.to_string(), "configmap \"x\" not found");
    s.watcher.send(&key("x"), cm("x", "2", false));
    settle().await;
    let Object::ConfigMap(got) = s.manager.get(&key("x")).await.unwrap() else { panic!() };
    assert_eq!(got.data.as_ref().unwrap()["k"], "2");
    let err = s.manager.get(&key("unregistered")).await.unwrap_err();
    assert!(matches!(err, ObjectError::NotRegistered(_)), "{err}");
}

#[tokio::test]
async fn a_change_wakes_the_pods_that_reference_the_object() {
    let mut s = setup();
    s.manager.register_pod(&pod("a", &["x"]));
    s.manager.register_pod(&pod("b", &["x"]));
    s.manager.register_pod(&pod("c", &["y"]));
    settle().await;
    s.watcher.send(&key("x"), cm("x", "1", false));
    settle().await;
    assert!(s.changes.try_recv().is_err(), "the first list wakes no one nobody waited for");
    s.watcher.send(&key("x"), cm("x", "1", false));
    settle().await;
    assert!(s.changes.try_recv().is_err(), "the same version again is no change");
    s.watcher.send(&key("x"), cm("x", "2", false));
    settle().await;
    assert_eq!(s.changes.try_recv().unwrap(), ["a", "b"]);
    s.watcher.send(&key("x"), None);
    settle().await;
    assert_eq!(s.changes.try_recv().unwrap(), ["a", "b"], "a deletion is a change");
}

#[tokio::test(start_paused = true)]
async fn a_read_before_the_first_list_times_out_and_its_pods_wake_when_it_comes() {
    let mut s = setup();
    s.manager.register_pod(&pod("a", &["x"]));
    settle().await;
    let err = s.manager.get(&key("x")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to sync configmap cache: timed out waiting for the condition"
    );
    s.watcher.send(&key("x"), cm("x", "1", false));
    settle().await;
    assert_eq!(s.changes.try_recv().unwrap(), ["a"]);
    assert!(s.manager.get(&key("x")).await.is_ok());
}

#[tokio::test]
async fn an_immutable_object_is_read_once_and_no_longer_watched() {
    let s = setup();
    s.manager.register_pod(&pod("a", &["frozen"]));
    settle().await;
    s.watcher.send(&key("frozen"), cm("frozen", "1", true));
    settle().await;
    assert!(s.watcher.stopped(&key("frozen")), "the watch ended");
    assert!(s.manager.get(&key("frozen")).await.is_ok(), "still readable");
}

#[tokio::test]
async fn stopping_the_manager_ends_every_watch() {
    let watcher = Arc::new(FakeWatcher::default());
    let (tx, _rx) = mpsc::unbounded_channel();
    let (tasks, stop) = (TaskTracker::new(), CancellationToken::new());
    let manager = WatchBasedManager::new(watcher.clone(), tx, tasks.clone(), stop.clone());
    manager.register_pod(&pod("a", &["x", "y"]));
    stop.cancel();
    tasks.close();
    tokio::time::timeout(Duration::from_secs(5), tasks.wait()).await.expect("watches stopped");
}
