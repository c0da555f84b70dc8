//! Container log rotation on real containerd: a container writing its log fast keeps at most
//! `containerLogMaxFiles` files, none much beyond `containerLogMaxSize`, the older ones
//! gzipped, and no line is lost at a rotation (containerd's `ReopenContainerLog`); bad rotation
//! settings stop the kubelet at start with the field named.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e::cluster::StandaloneNode;
use e2e::containerd::Containerd;
use e2e::kubelet::{Kubelet, NODE};
use e2e::{eventually, require};

const MAX_SIZE: u64 = 200 * 1024;
const MAX_FILES: usize = 3;
/// "About" the size: a log is measured every 3 s, and this container writes under 60 KB/s.
const SIZE_BOUND: u64 = 2 * MAX_SIZE;
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);

/// About 1 KB per line, numbered, 50 lines a second.
const CHATTY: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: chatty
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.35
    command:
    - sh
    - -c
    - |
      pad=$(printf %0900d 0); i=0
      while true; do i=$((i+1)); echo "line $i $pad"; usleep 20000; done
"#;

/// The log files of container `c`, `.tmp` files of a compression in progress left out.
fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|f| !f.to_string_lossy().ends_with(".tmp"));
    files.sort();
    files
}

/// The numbers of the `line N` records of a CRI log's text.
fn line_numbers(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.split(" line ").nth(1)?.split(' ').next()?.parse().ok()).collect()
}

/// `file` unzipped; `None` if it was removed (by the next rotation) before it could be read.
fn gunzip(file: &Path) -> Option<String> {
    let out = Command::new("gzip").arg("-dc").arg(file).output().unwrap();
    if !out.status.success() && !file.exists() {
        return None;
    }
    assert!(out.status.success(), "gzip -dc {}: {:?}", file.display(), out);
    Some(String::from_utf8(out.stdout).unwrap())
}

/// The older rotated file unzipped, the newest as it is, and the number of the current file's
/// first line: `None` while the directory is between two states (a file being compressed has
/// its plain and its gzip copy side by side a moment) or a rotation happened between the reads.
fn generations(dir: &Path, current: &Path) -> Option<(String, String, u64)> {
    let files = log_files(dir);
    let rotated: Vec<&PathBuf> = files.iter().filter(|f| *f != current).collect();
    let [older, newest] = rotated[..] else { return None };
    if !older.to_string_lossy().ends_with(".gz") || newest.to_string_lossy().ends_with(".gz") {
        return None;
    }
    let gz = gunzip(older)?;
    let plain = std::fs::read_to_string(newest).ok()?;
    let first = std::fs::read_to_string(current).unwrap_or_default();
    let first = *line_numbers(&first).first()?;
    (log_files(dir) == files).then_some((plain, gz, first))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_writing_fast_keeps_at_most_max_files_of_about_max_size() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let node = StandaloneNode::start_with_config(
        "containerLogMonitorInterval: 3s\n",
        &["--container-log-max-size=200Ki", "--container-log-max-files=3"],
    )
    .await
    .unwrap();
    node.kubelet.write_manifest("chatty.yaml", CHATTY).unwrap();
    node.running(&format!("chatty-{NODE}"), WAIT, POLL).await;
    let pod_dir = std::fs::read_dir(node.kubelet.logs_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().contains("chatty"))
        .unwrap_or_else(|| node.fail("no log directory for chatty"))
        .path();
    let dir = pod_dir.join("c");
    let current = dir.join("0.log");

    // Watch until four rotations have happened, checking the bounds at every look.
    let mut rotated_names = BTreeSet::new();
    let seen = eventually("four rotations", Duration::from_secs(90), POLL, || {
        let files = log_files(&dir);
        assert!(files.len() <= MAX_FILES, "more than {MAX_FILES} files: {files:?}");
        for f in &files {
            let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
            assert!(size <= SIZE_BOUND, "{} is {size} bytes", f.display());
        }
        rotated_names.extend(files.into_iter().filter(|f| *f != current));
        let done = rotated_names.len() >= 4;
        async move { done.then_some(()) }
    })
    .await;
    if let Err(e) = seen {
        node.fail(format!("{e}; rotated so far: {rotated_names:?}"));
    }

    // The newest rotation is plain text, the older ones gzip; every line of them is there,
    // in order, up to the first line of the current file.
    let read = eventually("two rotated generations", WAIT, POLL, || {
        let found = generations(&dir, &current);
        async move { found }
    })
    .await;
    let (plain, gz, first_current) = read.unwrap_or_else(|e| node.fail(e));
    assert!(gz.len() as u64 <= SIZE_BOUND, "the gzipped log holds {} bytes", gz.len());
    let numbers: Vec<u64> = line_numbers(&gz).into_iter().chain(line_numbers(&plain)).collect();
    assert!(numbers.len() > 100, "{} lines", numbers.len());
    for pair in numbers.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "a line went missing between {} and {}", pair[0], pair[1]);
    }
    assert_eq!(numbers.last().map(|n| n + 1), Some(first_current));
    node.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rotation_settings_stop_the_kubelet_at_start_naming_the_field() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let containerd = Containerd::start(Default::default()).await.unwrap();
    for (config, flags, want) in [
        (
            "",
            &["--container-log-max-files=1"][..],
            "containerLogMaxFiles: invalid MaxFiles 1, must be > 1",
        ),
        (
            "",
            &["--container-log-max-size=ten"][..],
            "--container-log-max-size: failed to parse container log max size \"ten\"",
        ),
        (
            "containerLogMaxSize: lots\n",
            &[][..],
            "containerLogMaxSize: failed to parse container log max size \"lots\"",
        ),
        (
            "containerLogMonitorInterval: 1s\n",
            &[][..],
            "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s",
        ),
    ] {
        let mut kubelet =
            Kubelet::start_standalone_with_config(&containerd, config, flags).unwrap();
        let status = eventually("the kubelet exits", WAIT, POLL, || {
            let exited = kubelet.exited();
            async move { exited }
        })
        .await
        .unwrap();
        assert!(!status.success());
        let log = kubelet.log_tail(200);
        assert!(log.contains(want), "{want}\n{log}");
        drop(kubelet);
    }
    let report = containerd.stop().await;
    assert!(report.is_clean(), "teardown leaked: {report:#?}");
}
