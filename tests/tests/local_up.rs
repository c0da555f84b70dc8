//! The README's main-job command runs (the `local-up` binary behind `hack/local-up.sh`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Command;

use e2e::require;

#[test]
fn local_up_runs_the_example_nginx_pod_through_the_kubelet_and_cleans_up() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_local-up")).arg("--once").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "local-up failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("pod nginx-pod-local-node is Running on 10."), "{stdout}");
    assert!(stdout.contains("It works"), "the page it serves: {stdout}");
    assert!(stdout.contains("nothing left behind"), "{stdout}");
}
