//! The kubelet under systemd's protocols, with systemd's own tools: `systemd-analyze verify`
//! accepts the unit, and the kubelet binary, run as a `Type=notify` unit with a watchdog would
//! run it (`NOTIFY_SOCKET`, `WATCHDOG_USEC`), says `READY=1` with a `STATUS=`, pings `WATCHDOG=1`
//! at half the timeout, and says `STOPPING=1` on SIGTERM; a timeout systemd could not be pinged
//! within is refused at start. (A stalled sync loop stopping the pings is shown under paused time
//! in `kubelet::watchdog`'s tests: the threshold is upstream's five minutes.)
//! `hack/install.sh` stages the binary, unit, config and root-only directories.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use e2e::kubelet::kubelet_binary;
use fake_cri::FakeCriServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn systemd_analyze_verify_accepts_the_kubelet_unit() {
    let tool = "systemd-analyze";
    assert!(
        Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success()),
        "{tool} is missing: hack/install-deps.sh installs Debian's systemd package"
    );
    // The unit names the installed path; point it at the binary under test.
    let unit = std::fs::read_to_string(workspace_root().join("systemd/kubelet.service")).unwrap();
    assert!(unit.contains("WatchdogSec="), "the unit asks for the watchdog");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubelet.service");
    let binary = kubelet_binary().unwrap();
    std::fs::write(&path, unit.replace("/usr/local/bin/kubelet", &binary.display().to_string()))
        .unwrap();
    let out = Command::new(tool).arg("verify").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{tool} verify: {stderr}");
}

/// Messages on the notify socket, one datagram each, until `until` holds or `wait` passes.
fn receive(sock: &UnixDatagram, wait: Duration, until: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !until(&got) && Instant::now() < deadline {
        sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        if let Ok(n) = sock.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    got
}

fn count(got: &[String], line: &str) -> usize {
    got.iter().filter(|m| m.lines().any(|l| l == line)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_says_ready_pings_the_watchdog_at_half_its_timeout_and_says_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let cri = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
    for d in ["manifests", "root", "logs"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let config = dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: {}\nstaticConfigPath: \"\"\ncontainerRuntimeEndpoint: unix://{}\npodLogsDir: {}\ncgroupsPerQOS: false\nenforceNodeAllocatable: []\nport: 0\nreadOnlyPort: 0\nhealthzPort: 0\n",
            dir.path().join("manifests").display(),
            dir.path().join("cri.sock").display(),
            dir.path().join("logs").display(),
        ),
    )
    .unwrap();
    let notify = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&notify).unwrap();
    let start = |watchdog_usec: &str| {
        Command::new(kubelet_binary().unwrap())
            .arg("--config")
            .arg(&config)
            .arg("--root-dir")
            .arg(dir.path().join("root"))
            .args(["--hostname-override", "node-sd"])
            .env("NOTIFY_SOCKET", &notify)
            .env("WATCHDOG_USEC", watchdog_usec)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // A timeout of one second leaves no room to ping at half of it: refused at start.
    let out = start("1000000").wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("WATCHDOG_USEC") && stderr.contains("must be above 1s"), "{stderr}");

    // Two seconds: READY=1 with a status, then WATCHDOG=1 about every second.
    let mut kubelet = start("2000000");
    let got = receive(&sock, Duration::from_secs(30), |got| count(got, "WATCHDOG=1") >= 4);
    assert_eq!(count(&got, "READY=1"), 1, "{got:?}");
    assert!(got[0].lines().any(|l| l == "STATUS=running: node node-sd"), "{got:?}");
    assert!(count(&got, "WATCHDOG=1") >= 4, "{got:?}");

    // SIGTERM: STOPPING=1, and the process exits cleanly.
    kill(Pid::from_raw(i32::try_from(kubelet.id()).unwrap()), Signal::SIGTERM).unwrap();
    let got = receive(&sock, Duration::from_secs(20), |got| count(got, "STOPPING=1") >= 1);
    assert_eq!(count(&got, "STOPPING=1"), 1, "{got:?}");
    let stopping = got.iter().find(|m| m.contains("STOPPING=1")).unwrap();
    assert!(stopping.contains("STATUS=stopping: pods keep running"), "{stopping}");
    let status = kubelet.wait().unwrap();
    assert!(status.success(), "{status:?}");
    cri.shutdown().await.unwrap();
}

#[test]
fn install_sh_puts_the_binary_unit_config_and_root_only_manifest_directories_in_place() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dest = tempfile::tempdir().unwrap();
    // An existing manifest directory left group-writable is tightened.
    std::fs::create_dir_all(dest.path().join("etc/kubernetes/manifests")).unwrap();
    let loose = std::fs::Permissions::from_mode(0o775);
    std::fs::set_permissions(dest.path().join("etc/kubernetes/manifests"), loose).unwrap();
    let install = || {
        Command::new(workspace_root().join("hack/install.sh"))
            .env("DESTDIR", dest.path())
            .env("KUBELET_BIN", kubelet_binary().unwrap())
            .output()
            .unwrap()
    };
    let out = install();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = |p: &str| {
        let m = std::fs::metadata(dest.path().join(p)).unwrap();
        (m.mode() & 0o7777, m.uid())
    };
    assert_eq!(mode("usr/local/bin/kubelet"), (0o755, 0));
    assert_eq!(mode("etc/systemd/system/kubelet.service"), (0o644, 0));
    assert_eq!(mode("etc/kubernetes/kubelet.yaml"), (0o600, 0));
    assert_eq!(mode("etc/kubernetes/manifests"), (0o700, 0));
    assert_eq!(mode("etc/kubernetes/static-config"), (0o700, 0));
    // The staged unit, pointed at the staged binary, passes systemd's own check.
    let unit = std::fs::read_to_string(dest.path().join("etc/systemd/system/kubelet.service"))
        .unwrap()
        .replace(
            "/usr/local/bin/kubelet",
            &dest.path().join("usr/local/bin/kubelet").display().to_string(),
        );
    let path = dest.path().join("kubelet.service");
    std::fs::write(&path, unit).unwrap();
    let verify = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    // A second run keeps the operator's config.
    std::fs::write(dest.path().join("etc/kubernetes/kubelet.yaml"), "# mine\n").unwrap();
    let again = install();
    assert!(again.status.success());
    let config = std::fs::read_to_string(dest.path().join("etc/kubernetes/kubelet.yaml")).unwrap();
    assert_eq!(config, "# mine\n");
}
