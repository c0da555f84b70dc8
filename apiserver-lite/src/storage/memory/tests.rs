//! The store over SQLite: revisions, watches, lists at a past revision, group commit and a
//! failed batch.

use super::super::sqlite::SqliteBackend;
use super::*;

fn store(dir: &std::path::Path) -> Store {
    Store::open(Arc::new(SqliteBackend::open(&dir.join("s.db")).unwrap())).unwrap()
}

async fn put(s: &Store, key: &str, v: &str) -> Applied {
    let v = Bytes::from(v.to_string());
    s.mutate::<StorageError, _>(key, |_, _| Ok(Mutation::Put(v.clone()))).await.unwrap()
}

#[tokio::test]
async fn writes_get_increasing_revisions_that_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    assert_eq!(put(&s, "/pods/a", "1").await.revision, 1);
    assert_eq!(put(&s, "/pods/b", "1").await.revision, 2);
    assert_eq!(put(&s, "/pods/a", "2").await.revision, 3);
    s.mutate::<StorageError, _>("/pods/b", |_, _| Ok(Mutation::Delete)).await.unwrap();
    drop(s);
    let s = store(dir.path());
    assert_eq!(s.revision(), 4);
    let (items, rev) = s.list("/pods/");
    assert_eq!(rev, 4);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].1, Stored { value: Bytes::from("2"), revision: 3 });
    assert_eq!(put(&s, "/pods/c", "1").await.revision, 5, "revisions continue upward");
}

#[tokio::test]
async fn decide_sees_the_current_value_and_the_coming_revision() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    put(&s, "/k", "v1").await;
    let r = s
        .mutate::<StorageError, _>("/k", |cur, next| {
            assert_eq!(cur.unwrap().value, "v1");
            Ok(Mutation::Put(Bytes::from(format!("rv={next}"))))
        })
        .await
        .unwrap();
    assert_eq!(s.get("/k").unwrap().value, format!("rv={}", r.revision));
    let unchanged =
        s.mutate::<StorageError, _>("/k", |_, _| Ok(Mutation::Unchanged)).await.unwrap();
    assert_eq!(unchanged.revision, r.revision, "no write, no new revision");
    assert_eq!(s.revision(), r.revision);
}

#[tokio::test]
async fn watches_resume_from_a_revision_and_filter_by_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    put(&s, "/pods/a", "1").await;
    put(&s, "/nodes/n", "1").await;
    put(&s, "/pods/b", "1").await;
    let mut w = s.watch("/pods/", Some(1)).unwrap();
    assert_eq!(w.initial.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["/pods/b"]);
    put(&s, "/nodes/m", "1").await;
    put(&s, "/pods/a", "2").await;
    let e = w.next().await.unwrap();
    assert_eq!(
        (e.key.as_str(), e.kind, e.prev.as_ref().map(|p| (p.value.as_ref(), p.revision))),
        ("/pods/a", EventType::Modified, Some((&b"1"[..], 1)))
    );
    s.mutate::<StorageError, _>("/pods/a", |_, _| Ok(Mutation::Delete)).await.unwrap();
    let e = w.next().await.unwrap();
    assert_eq!((e.kind, e.value.as_ref()), (EventType::Deleted, &b"2"[..]));
}

#[tokio::test]
async fn a_list_at_a_past_revision_undoes_the_later_writes_under_its_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    put(&s, "/pods/a", "1").await; // 1
    put(&s, "/pods/b", "1").await; // 2
    put(&s, "/pods/a", "2").await; // 3
    s.mutate::<StorageError, _>("/pods/b", |_, _| Ok(Mutation::Delete)).await.unwrap(); // 4
    put(&s, "/pods/c", "1").await; // 5
    put(&s, "/podsx", "1").await; // 6: another prefix
    let at = |rev, after| {
        s.list_at("/pods/", after, rev)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8(v.value.to_vec()).unwrap(), v.revision))
            .collect::<Vec<_>>()
    };
    let kv = |k: &str, v: &str, r| (k.to_string(), v.to_string(), r);
    assert_eq!(at(2, None), [kv("/pods/a", "1", 1), kv("/pods/b", "1", 2)]);
    assert_eq!(at(3, None), [kv("/pods/a", "2", 3), kv("/pods/b", "1", 2)]);
    assert_eq!(at(4, None), [kv("/pods/a", "2", 3)]);
    assert_eq!(at(6, None), [kv("/pods/a", "2", 3), kv("/pods/c", "1", 5)]);
    assert_eq!(at(2, Some("/pods/a")), [kv("/pods/b", "1", 2)]);
    assert_eq!(at(0, None), []);
    assert_eq!(at(99, None), at(6, None), "a future revision reads the current state");
    drop(s);
    let s = store(dir.path()); // history starts empty after a restart
    assert_eq!(s.list_at("/", None, 5).unwrap_err(), Expired { requested: 5, oldest: 6 });
    assert_eq!(s.list_at("/pods/", None, 6).unwrap().len(), 2);
}

#[tokio::test]
async fn a_watch_older_than_the_history_is_expired() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    put(&s, "/a", "1").await;
    drop(s);
    let s = store(dir.path()); // history starts empty after a restart
    assert_eq!(s.watch("/", Some(0)).unwrap_err(), Expired { requested: 0, oldest: 1 });
    assert!(s.watch("/", Some(1)).is_ok());
}

#[tokio::test]
async fn a_watcher_that_falls_behind_is_closed_without_slowing_writers() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let mut slow = s.watch("/", None).unwrap();
    for i in 0..WATCH_BUFFER + 10 {
        put(&s, &format!("/k{i}"), "v").await;
    }
    assert_eq!(slow.next().await.unwrap_err(), WatchEnd::Lagged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_each_see_the_last_decided_value_and_get_contiguous_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(store(dir.path()));
    let bump = |s: Arc<Store>| async move {
        s.mutate::<StorageError, _>("/counter", |cur, _| {
            let n: u64 = cur.map_or(0, |c| std::str::from_utf8(&c.value).unwrap().parse().unwrap());
            Ok(Mutation::Put(Bytes::from((n + 1).to_string())))
        })
        .await
        .unwrap()
        .revision
    };
    let tasks: Vec<_> = (0..200).map(|_| tokio::spawn(bump(s.clone()))).collect();
    let mut revisions = Vec::new();
    for t in tasks {
        revisions.push(t.await.unwrap());
    }
    revisions.sort_unstable();
    assert_eq!(revisions, (1..=200).collect::<Vec<_>>());
    assert_eq!(s.get("/counter").unwrap().value, "200");
    drop(Arc::into_inner(s).unwrap());
    let s = store(dir.path());
    assert_eq!((s.get("/counter").unwrap().value, s.revision()), (Bytes::from("200"), 200));
}

/// A backend whose appends can be held and made to fail.
#[derive(Debug)]
struct Faulty {
    inner: SqliteBackend,
    gate: std::sync::Mutex<()>,
    fail: std::sync::atomic::AtomicBool,
    started: std::sync::atomic::AtomicUsize,
}

impl Backend for Faulty {
    fn load(&self) -> Result<(Vec<super::super::Record>, Revision), StorageError> {
        self.inner.load()
    }
    fn append(&self, first: Revision, writes: &[Write]) -> Result<(), StorageError> {
        self.started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _held = self.gate.lock().unwrap();
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StorageError::Closed);
        }
        self.inner.append(first, writes)
    }
    fn compact(&self, revision: Revision) -> Result<(), StorageError> {
        self.inner.compact(revision)
    }
}

#[tokio::test]
#[expect(clippy::await_holding_lock, reason = "the gate holds the committer thread, not a task")]
async fn a_failed_batch_fails_the_writes_decided_on_it_and_the_store_carries_on() {
    use std::sync::atomic::Ordering::SeqCst;
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(Faulty {
        inner: SqliteBackend::open(&dir.path().join("s.db")).unwrap(),
        gate: std::sync::Mutex::new(()),
        fail: false.into(),
        started: 0.into(),
    });
    let s = Arc::new(Store::open(backend.clone()).unwrap());
    put(&s, "/kept", "1").await;
    let held = backend.gate.lock().unwrap();
    let a = tokio::spawn({
        let s = s.clone();
        async move { put_result(&s, "/k", "a").await }
    });
    eventually(|| backend.started.load(SeqCst) == 2).await;
    // Decided on top of the write that is about to fail: it must fail too.
    let saw = Arc::new(std::sync::Mutex::new(None));
    let b = tokio::spawn({
        let (s, saw) = (s.clone(), saw.clone());
        async move {
            s.mutate::<StorageError, _>("/k", move |cur, _| {
                *saw.lock().unwrap() = cur.map(|c| c.value.clone());
                Ok(Mutation::Put(Bytes::from("b")))
            })
            .await
        }
    });
    eventually(|| saw.lock().unwrap().is_some()).await;
    assert_eq!(saw.lock().unwrap().as_deref(), Some(&b"a"[..]), "b saw the pending value");
    backend.fail.store(true, SeqCst);
    drop(held);
    assert!(matches!(a.await.unwrap(), Err(StorageError::Batch(_))));
    assert!(matches!(b.await.unwrap(), Err(StorageError::Batch(_))));
    assert_eq!((s.get("/k"), s.revision()), (None, 1), "nothing undurable is visible");
    backend.fail.store(false, SeqCst);
    let c = put_result(&s, "/k", "c").await.unwrap();
    assert_eq!((c.revision, s.get("/k").unwrap().value), (2, Bytes::from("c")));
}

async fn eventually(cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "condition not reached in 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

async fn put_result(s: &Store, key: &str, v: &str) -> Result<Applied, StorageError> {
    let v = Bytes::from(v.to_string());
    s.mutate::<StorageError, _>(key, |_, _| Ok(Mutation::Put(v.clone()))).await
}
