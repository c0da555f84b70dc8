//! Image garbage collection on real containerd: with the image filesystem above the high
//! threshold, the images no container uses are removed, while the image a running pod uses
//! and the runtime's sandbox image stay; the shortfall is a `FreeDiskSpaceFailed` event.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::StandaloneNode;
use e2e::containerd::SANDBOX_IMAGE;
use e2e::kubelet::NODE;
use e2e::{eventually, eventually_showing, require};
use proto::cri;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);

const SLEEPER: &str = "apiVersion: v1
kind: Pod
metadata:
  name: sleeper
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.35
    command: [sleep, \"3600\"]
";

async fn image_names(node: &StandaloneNode) -> Vec<String> {
    let list = node.cri.list_images(cri::ListImagesRequest { filter: None }).await.unwrap();
    let mut names: Vec<String> = list.images.into_iter().flat_map(|i| i.repo_tags).collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_the_high_threshold_unused_images_go_and_the_image_in_use_stays() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let mut node = StandaloneNode::start().await.unwrap();
    node.kubelet.write_manifest("sleeper.yaml", SLEEPER).unwrap();
    node.running(&format!("sleeper-{NODE}"), WAIT, POLL).await;
    let before = image_names(&node).await;
    assert!(before.contains(&"docker.io/library/busybox-httpd:1.35".to_string()), "{before:?}");

    // The harness turns image GC off; restart with the image filesystem "full" at any use.
    let path = node.kubelet.config_path();
    let config = std::fs::read_to_string(&path).unwrap().replace(
        "imageGCHighThresholdPercent: 100\n",
        "imageGCHighThresholdPercent: 1\nimageGCLowThresholdPercent: 0\nimageMinimumGCAge: 0s\n",
    );
    std::fs::write(&path, config).unwrap();
    node.kubelet.stop();
    node.kubelet.restart().unwrap();

    // The first collection runs at start, removing unused images one by one.
    let want = ["docker.io/library/busybox:1.35", SANDBOX_IMAGE];
    eventually_showing("only the used and the sandbox images left", WAIT, POLL, || async {
        let left = image_names(&node).await;
        if left == want { Ok(()) } else { Err(left) }
    })
    .await
    .unwrap_or_else(|e| node.fail(format!("{e:#}; before: {before:?}, wanted: {want:?}")));
    // The pod runs on, untouched.
    node.running(&format!("sleeper-{NODE}"), WAIT, POLL).await;
    // The event follows the whole pass, which may still be removing other unused images.
    let failed = eventually("a FreeDiskSpaceFailed event", WAIT, POLL, || async {
        let events = node.kubelet.get("/events").await?;
        events.as_array()?.iter().find(|e| e["reason"] == "FreeDiskSpaceFailed").cloned()
    })
    .await
    .unwrap_or_else(|e| node.fail(e));
    assert_eq!(failed["object"], format!("node/{NODE}"));
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .starts_with("Failed to garbage collect required amount of images. Attempted to free "),
        "{failed}"
    );
    node.teardown().await;
}
