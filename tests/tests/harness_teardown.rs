//! The containerd harness leaves nothing behind: no processes, mounts, interfaces or cgroups,
//! even when pods are still running at teardown.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::containerd::Containerd;
use e2e::cri_suite::{self, Target};
use e2e::{leaks, require};

#[tokio::test]
async fn teardown_with_running_pods_leaves_no_processes_mounts_interfaces_or_cgroups()
-> anyhow::Result<()> {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return Ok(());
    }
    let containerd = Containerd::start(Default::default()).await?;
    containerd.import_test_images()?;
    let client = containerd.client().await?;
    let log_root = containerd.dir().join("pods");
    let target =
        Target { client: &client, cgroup_parent: containerd.cgroup_parent(), log_root: &log_root };

    for n in 0..2 {
        cri_suite::start_pod(&target, &format!("sleeper-{n}"), &["sleep", "3600"]).await?;
    }

    // Everything the teardown must remove is really there first.
    let dir = containerd.dir().to_path_buf();
    let cgroup_name = containerd.cgroup_parent().trim_start_matches('/').to_string();
    let processes = leaks::processes(&dir, &cgroup_name);
    assert!(
        processes.iter().any(|(_, c)| c.contains("containerd-shim")),
        "no shim found: {processes:?}"
    );
    assert!(
        processes.iter().any(|(_, c)| c.starts_with("sleep 3600")),
        "no container process: {processes:?}"
    );
    assert!(!leaks::mounts_under(&dir).is_empty(), "no rootfs or netns mounts");
    assert!(leaks::interface_exists(containerd.bridge()), "no CNI bridge");
    assert_eq!(leaks::bridge_ports(containerd.bridge()).len(), 2, "one veth per pod");
    assert!(!leaks::cgroups(&cgroup_name).is_empty(), "no pod cgroups");

    let report = tokio::time::timeout(Duration::from_secs(60), containerd.stop()).await?;
    assert!(report.is_clean(), "teardown leaked: {report:#?}");
    assert!(!dir.exists());
    Ok(())
}
