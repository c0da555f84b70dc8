//! The README's main-job command runs (the `local-up` binary behind `hack/local-up.sh`): a
//! one-node cluster where the seed's `kubectl create -f` flow ends in `nginx-pod 1/1 Running`
//! and `kubectl create deployment web --image=busybox-httpd:1.35 --replicas=2` in `web 2/2`;
//! and the same with `--etcd` (a private etcd, two apiservers on it).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Command;

use e2e::require;

#[test]
fn local_up_runs_the_seed_flow_on_a_one_node_cluster_and_cleans_up() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let stdout = local_up(&["--once"]);
    assert!(stdout.contains("(SQLite under "), "{stdout}");
}

#[test]
fn local_up_with_etcd_runs_the_seed_flow_across_two_apiservers_and_cleans_up() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let stdout = local_up(&["--once", "--etcd"]);
    assert!(stdout.contains("(the kubelet's), both on etcd http://127.0.0.1:"), "{stdout}");
}

/// Runs local-up with `args` and checks what every run prints; returns its standard output.
fn local_up(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_local-up")).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "local-up failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("pod/nginx-pod created"), "{stdout}");
    let row =
        |name: &str| stdout.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    let seed = row("nginx-pod ");
    assert!(
        seed.contains("1/1") && seed.contains("Running") && seed.contains("local-node"),
        "{stdout}"
    );
    let mirror = row("nginx-pod-local-node ");
    assert!(
        mirror.contains("1/1") && mirror.contains("Running"),
        "the static pod's mirror: {stdout}"
    );
    assert!(stdout.contains("scheduled to local-node, is Running on 10."), "{stdout}");
    assert!(stdout.contains("It works"), "the page it serves: {stdout}");
    assert!(stdout.contains("deployment.apps/web created"), "{stdout}");
    let web = stdout
        .lines()
        .find(|l| l.starts_with("deployment.apps/web ") && !l.ends_with("created"))
        .unwrap_or_default();
    assert_eq!(web.split_whitespace().nth(1), Some("2/2"), "the Deployment: {stdout}");
    assert!(stdout.contains("nothing left behind"), "{stdout}");
    stdout
}
