//! The stores the API suites run on: the embedded SQLite file, one etcd member, and a
//! three-member etcd cluster (Debian's etcd, started for the test and torn down with it).
//! A suite's test is an `async fn(Backend)`; [`on_every_store!`] makes one test per store.

use std::sync::Arc;

use apiserver_lite::registry::versioner::set_resource_version;
use apiserver_lite::resources;
use apiserver_lite::storage::Store;
use apiserver_lite::storage::etcd::{EtcdConfig, KeyLayout, Remote};
use apiserver_lite::storage::sqlite::SqliteBackend;
use e2e::etcd::EtcdCluster;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    /// An etcd cluster of this many members.
    Etcd(usize),
}

/// Where a test's objects live; [`open`](Self::open) again is an apiserver restarting (or a
/// second apiserver, over etcd).
pub struct TestStore {
    pub backend: Backend,
    dir: tempfile::TempDir,
    pub etcd: Option<EtcdCluster>,
}

impl TestStore {
    pub fn start(backend: Backend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let etcd = match backend {
            Backend::Sqlite => None,
            Backend::Etcd(n) => Some(EtcdCluster::start(n).unwrap()),
        };
        Self { backend, dir, etcd }
    }

    /// Makes the history before now unreadable, as a restart of an SQLite store does: over
    /// etcd (whose history outlives a restart), a compaction to the current revision.
    pub async fn forget_history(&self) {
        let Some(etcd) = &self.etcd else { return };
        let mut client = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
        let now = client.get("/", None).await.unwrap().header().unwrap().revision();
        client.compact(now, None).await.unwrap();
    }

    pub async fn open(&self) -> Store {
        match &self.etcd {
            None => {
                Store::open(Arc::new(SqliteBackend::open(&self.dir.path().join("db")).unwrap()))
                    .unwrap()
            }
            Some(etcd) => {
                let config = EtcdConfig {
                    servers: etcd.endpoints(),
                    prefix: "/registry".into(),
                    ca_file: None,
                    cert_file: None,
                    key_file: None,
                };
                let layout = KeyLayout::new(&config.prefix, resources::etcd_routes());
                let remote = Remote::connect(&config, layout, set_resource_version).await.unwrap();
                Store::open_etcd(remote).await.unwrap()
            }
        }
    }
}

/// One `#[tokio::test]` per store for each named `async fn(Backend)`, in modules `sqlite`,
/// `etcd1` and `etcd3`.
#[macro_export]
macro_rules! on_every_store {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::support::stores::Backend::Sqlite).await })+
        }
        mod etcd1 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::support::stores::Backend::Etcd(1)).await })+
        }
        mod etcd3 {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name($crate::support::stores::Backend::Etcd(3)).await })+
        }
    };
}
