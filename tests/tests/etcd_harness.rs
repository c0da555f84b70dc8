//! The etcd harness: a three-member cluster starts, names its leader, elects another when the
//! leader is killed, and takes the killed member back; a single member keeps its data across a
//! graceful stop and a restart, read back by key and by prefix; bad member indexes are refused; teardown leaves no etcd process
//! and no directory. No root and no containerd needed: only `etcd` (package `etcd-server`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::PathBuf;
use std::time::Duration;

use e2e::etcd::EtcdCluster;
use e2e::{eventually, leaks};

/// Well above etcd's election timeout (1 s) on a loaded 2-core machine.
const ELECTION: Duration = Duration::from_secs(20);

/// Drops the cluster and checks that no process mentions its directory and the directory is gone.
fn teardown_leaves_nothing(etcd: EtcdCluster) {
    let dir: PathBuf = etcd.dir().to_path_buf();
    let no_cgroup = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(!leaks::processes(&dir, &no_cgroup).is_empty(), "members run before the drop");
    drop(etcd);
    let left = leaks::processes(&dir, &no_cgroup);
    assert!(left.is_empty(), "etcd processes left after drop: {left:?}");
    assert!(!dir.exists(), "{} left after drop", dir.display());
}

#[tokio::test]
async fn three_members_elect_a_new_leader_when_the_leader_is_killed_and_it_rejoins()
-> anyhow::Result<()> {
    let mut etcd = EtcdCluster::start(3)?;
    assert_eq!(etcd.len(), 3);
    let endpoints = etcd.endpoints();
    assert_eq!(endpoints.len(), 3);
    assert!(endpoints.iter().all(|e| e.starts_with("http://127.0.0.1:")), "{endpoints:?}");
    assert_eq!(etcd.servers_flag(), format!("--etcd-servers={}", endpoints.join(",")));
    assert!((0..3).all(|i| etcd.is_healthy(i)));

    let first = eventually("a leader", ELECTION, Duration::from_millis(100), || {
        std::future::ready(etcd.leader().ok())
    })
    .await?;
    let term = etcd.status(first)?.raft_term;
    etcd.put("/before", b"kill")?;

    etcd.kill(first)?;
    assert!(!etcd.is_running(first));
    assert!(etcd.kill(first).is_err(), "a killed member cannot be killed again");
    let second = eventually("a new leader", ELECTION, Duration::from_millis(100), || {
        std::future::ready(etcd.leader().ok())
    })
    .await?;
    assert_ne!(second, first, "the killed member still leads");
    assert!(etcd.status(second)?.raft_term > term, "no new term after the election");
    // The two survivors are a quorum: writes go on without the killed member.
    etcd.put("/during", b"outage")?;
    assert_eq!(etcd.get("/during")?.as_deref(), Some(&b"outage"[..]));

    etcd.restart(first)?;
    assert!(etcd.is_running(first) && etcd.is_healthy(first));
    assert!(etcd.restart(first).is_err(), "a running member cannot be restarted");
    let now =
        eventually("all three agree on a leader", ELECTION, Duration::from_millis(100), || {
            std::future::ready(etcd.leader().ok())
        })
        .await?;
    assert!((0..3).all(|i| etcd.is_healthy(i)));
    // The rejoined member caught up with what was written while it was down (its own copy).
    eventually("the rejoined member to catch up", ELECTION, Duration::from_millis(100), || {
        let caught_up = etcd.get_from(first, "/during").ok().flatten().is_some();
        std::future::ready(caught_up.then_some(()))
    })
    .await?;
    assert_eq!(etcd.get_from(first, "/before")?.as_deref(), Some(&b"kill"[..]));
    assert_eq!(etcd.keys("/")?, ["/before", "/during"]);
    assert_eq!(etcd.leader()?, now);

    teardown_leaves_nothing(etcd);
    Ok(())
}

#[tokio::test]
async fn one_member_leads_alone_and_keeps_its_data_across_a_stop_and_a_restart()
-> anyhow::Result<()> {
    let mut etcd = EtcdCluster::start(1)?;
    assert_eq!(etcd.endpoints().len(), 1);
    assert_eq!(etcd.leader()?, 0);
    etcd.put("/registry/namespaces/default", b"{}")?;
    etcd.put("/registry/namespaces/kube-system", b"")?;
    etcd.put("/registryx", b"outside the prefix")?;
    let revision = etcd.status(0)?.revision;

    etcd.stop(0)?;
    assert!(!etcd.is_running(0) && !etcd.is_healthy(0));
    assert!(etcd.leader().is_err(), "a stopped cluster has no leader");
    let refused = etcd.put("/k", b"v").unwrap_err().to_string();
    assert!(refused.contains("no etcd member is running"), "{refused}");
    etcd.restart(0)?;
    assert_eq!(etcd.leader()?, 0);
    assert_eq!(etcd.get("/registry/namespaces/default")?.as_deref(), Some(&b"{}"[..]));
    assert_eq!(etcd.get("/registry/namespaces/kube-system")?.as_deref(), Some(&b""[..]));
    assert_eq!(etcd.get("/registry/namespaces/none")?, None);
    assert_eq!(
        etcd.keys("/registry/")?,
        ["/registry/namespaces/default", "/registry/namespaces/kube-system"]
    );
    assert_eq!(etcd.status(0)?.revision, revision);

    teardown_leaves_nothing(etcd);
    Ok(())
}

#[tokio::test]
async fn bad_member_indexes_are_refused_naming_the_cluster_size() -> anyhow::Result<()> {
    assert!(EtcdCluster::start(0).is_err());
    let mut etcd = EtcdCluster::start(1)?;
    let errors = [
        etcd.kill(1),
        etcd.stop(3),
        etcd.restart(1),
        etcd.status(1).map(drop),
        etcd.get_from(1, "/k").map(drop),
    ];
    for err in errors {
        let message = err.unwrap_err().to_string();
        assert!(message.contains("the cluster has 1"), "{message}");
    }
    assert!(etcd.client_addr(1).is_err());
    assert!(!etcd.is_running(1) && !etcd.is_healthy(1));
    teardown_leaves_nothing(etcd);
    Ok(())
}
