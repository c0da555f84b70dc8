//! The files of one log in a temp dir, and the manager against the fake runtime over a socket.

use std::io::Read;
use std::path::{Path, PathBuf};

use fake_cri::{FakeCriServer, Rpc};
use proto::{ClientOptions, CriClient};

use super::rotate::{self, is_in_use, prepare, rotated_files};
use super::*;

const IMAGE: &str = "busybox:1.35";

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn gunzip(path: &Path) -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn leftovers_of_an_interrupted_rotation_are_not_in_use() {
    let all: Vec<PathBuf> = ["0.log.1", "0.log.1.gz", "0.log.2", "0.log.3.gz.tmp", "0.log.4.gz"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let kept: Vec<&str> =
        all.iter().filter(|f| is_in_use(f, &all)).map(|f| f.to_str().unwrap()).collect();
    // `0.log.1` was compressed already; the `.tmp` is a compression that never finished.
    assert_eq!(kept, ["0.log.1.gz", "0.log.2", "0.log.4.gz"]);
}

#[test]
fn prepare_drops_leftovers_and_the_oldest_beyond_max_files_and_compresses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("0.log");
    for (name, text) in [
        ("0.log", "current\n"),
        ("0.log.20261101-000000.gz", "x"),
        ("0.log.20261102-000000.gz", "x"),
        ("0.log.20261103-000000", "third\n"),
        ("0.log.20261103-000000.gz.tmp", "half"),
        ("0.log.20261104-000000", "fourth\n"),
        // Another container's log beside it, which must not be touched.
        ("10.log", "other\n"),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let kept = prepare(&log, 4).unwrap();
    // Four files in all: the current one, the one about to be rotated, two older.
    assert_eq!(kept.len(), 2);
    assert_eq!(
        names(dir.path()),
        ["0.log", "0.log.20261103-000000.gz", "0.log.20261104-000000.gz", "10.log"]
    );
    assert_eq!(gunzip(&dir.path().join("0.log.20261104-000000.gz")), "fourth\n");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "current\n");
}

#[test]
fn a_rotation_renames_the_current_file_and_can_be_undone() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("0.log");
    std::fs::write(&log, "a\n").unwrap();
    let stamp =
        rotate::stamp(&jiff::civil::datetime(2026, 11, 27, 1, 2, 3, 0).in_tz("UTC").unwrap());
    assert_eq!(stamp, "20261127-010203");
    let rotated = rotate::rotate_latest(&log, &stamp).unwrap();
    assert_eq!(rotated, dir.path().join("0.log.20261127-010203"));
    assert!(!log.exists());
    rotate::undo_rotation(&log, &rotated).unwrap();
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "a\n");
    assert_eq!(rotated_files(&log).unwrap(), Vec::<PathBuf>::new());
}

#[test]
fn removing_a_containers_logs_takes_its_rotations_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["0.log", "0.log.20261101-000000.gz", "0.log.20261102-000000", "10.log", "1.log"] {
        std::fs::write(dir.path().join(name), "x").unwrap();
    }
    rotate::remove_all(&dir.path().join("0.log")).unwrap();
    assert_eq!(names(dir.path()), ["1.log", "10.log"]);
    // Nothing there is not an error.
    rotate::remove_all(&dir.path().join("0.log")).unwrap();
}

#[test]
fn max_size_parses_as_upstream_and_bad_policies_are_refused_in_its_words() {
    assert_eq!(LogRotatePolicy::parse_max_size("10Mi").unwrap(), Some(10 << 20));
    assert_eq!(LogRotatePolicy::parse_max_size("1k").unwrap(), Some(1000));
    assert_eq!(LogRotatePolicy::parse_max_size("-1").unwrap(), None);
    let e = LogRotatePolicy::parse_max_size("ten").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("failed to parse container log max size \"ten\": quantities must match"),
        "{e}"
    );
    let e = LogRotatePolicy::parse_max_size("1500m").unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to parse container log max size \"1500m\": invalid max log size"
    );

    let ok = LogRotatePolicy::default();
    assert_eq!(ok.validate(), Ok(()));
    let bad = LogRotatePolicy { max_files: 1, ..ok.clone() };
    assert_eq!(
        bad.validate(),
        Err(("containerLogMaxFiles", "invalid MaxFiles 1, must be > 1".into()))
    );
    let bad = LogRotatePolicy { max_workers: 0, ..ok.clone() };
    assert_eq!(bad.validate().unwrap_err().0, "containerLogMaxWorkers");
    let bad = LogRotatePolicy { monitor_interval: Duration::from_secs(2), ..ok };
    assert_eq!(
        bad.validate().unwrap_err().1,
        "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s"
    );
}

struct Rig {
    dir: tempfile::TempDir,
    fake: FakeCriServer,
    cri: CriClient,
}

impl Rig {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        fake.runtime().add_image(IMAGE).unwrap();
        let cri = CriClient::connect(fake.endpoint(), ClientOptions::default()).await.unwrap();
        Self { dir, fake, cri }
    }

    fn pod_logs(&self) -> PathBuf {
        self.dir.path().join("pods/default_p_uid-p")
    }

    /// Pod `p`'s sandbox, its logs under [`Rig::pod_logs`].
    async fn sandbox(&self) -> String {
        crate::test_cri::sandbox(&self.cri, "p", Some(&self.pod_logs())).await
    }

    /// A container of pod `p` whose log is `<pod logs>/<name>/0.log`, started or not.
    async fn container(&self, sandbox: &str, name: &str, start: bool) -> (String, PathBuf) {
        let id = crate::test_cri::container(&self.cri, sandbox, name, IMAGE, start).await;
        let log = self.pod_logs().join(name).join("0.log");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        (id, log)
    }

    fn manager(&self, max_size: u64, max_files: u32) -> ContainerLogManager {
        ContainerLogManager::new(
            self.cri.clone(),
            LogRotatePolicy {
                max_size: Some(max_size),
                max_files,
                max_workers: 2,
                monitor_interval: Duration::from_secs(10),
            },
        )
    }
}

fn outcome<'a>(round: &'a [(String, Outcome)], id: &str) -> &'a Outcome {
    &round.iter().find(|(c, _)| c == id).expect("container in the round").1
}

#[tokio::test]
async fn logs_at_the_size_are_rotated_and_reopened_and_at_most_max_files_remain() {
    let rig = Rig::new().await;
    let sandbox = rig.sandbox().await;
    let (big, big_log) = rig.container(&sandbox, "big", true).await;
    let (small, small_log) = rig.container(&sandbox, "small", true).await;
    let (_stopped, stopped_log) = rig.container(&sandbox, "stopped", false).await;
    std::fs::write(&small_log, "x".repeat(10)).unwrap();
    std::fs::write(&stopped_log, "x".repeat(5000)).unwrap();
    let manager = rig.manager(1000, 3);

    for round in 0..4u8 {
        std::fs::write(&big_log, format!("{round}").repeat(1000)).unwrap();
        let results = manager.rotate_logs().await.unwrap();
        let Outcome::Rotated(rotated) = outcome(&results, &big) else { panic!("{results:?}") };
        assert_eq!(outcome(&results, &small), &Outcome::Kept);
        // Only running containers are looked at.
        assert_eq!(results.len(), 2);
        // Rotations in one second would share a name; real rounds are ≥ 3 s apart.
        std::fs::rename(rotated, format!("{}-{round}", rotated.display())).unwrap();
    }
    let files = names(big_log.parent().unwrap());
    assert_eq!(files.len(), 3, "{files:?}");
    // The runtime reopened the current file; the newest rotation is plain, the older gzipped.
    assert_eq!(std::fs::metadata(&big_log).unwrap().len(), 0);
    let rotated = rotated_files(&big_log).unwrap();
    assert!(rotated[0].to_string_lossy().ends_with(".gz"), "{rotated:?}");
    assert_eq!(gunzip(&rotated[0]), "2".repeat(1000));
    assert_eq!(std::fs::read_to_string(&rotated[1]).unwrap(), "3".repeat(1000));
    assert_eq!(std::fs::metadata(&stopped_log).unwrap().len(), 5000);
}

#[tokio::test]
async fn a_reopen_the_runtime_refuses_puts_the_log_back_and_a_missing_log_is_reopened() {
    let rig = Rig::new().await;
    let sandbox = rig.sandbox().await;
    let (id, log) = rig.container(&sandbox, "c", true).await;
    std::fs::write(&log, "y".repeat(2000)).unwrap();
    let manager = rig.manager(1000, 5);
    rig.fake.runtime().fail_next(Rpc::ReopenContainerLog, tonic::Status::internal("busy"));
    let results = manager.rotate_logs().await.unwrap();
    assert_eq!(outcome(&results, &id), &Outcome::Failed);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "y".repeat(2000));
    assert_eq!(rotated_files(&log).unwrap(), Vec::<PathBuf>::new());

    // A rotation interrupted after the rename: the next round has the runtime reopen the file.
    std::fs::rename(&log, log.with_file_name("0.log.20261127-000000")).unwrap();
    let results = manager.rotate_logs().await.unwrap();
    assert_eq!(outcome(&results, &id), &Outcome::Kept);
    assert!(log.exists());
    assert_eq!(rig.fake.runtime().calls(Rpc::ReopenContainerLog), 2);
}

#[tokio::test]
async fn a_containers_log_path_is_asked_of_the_runtime_once_while_it_runs() {
    let rig = Rig::new().await;
    let sandbox = rig.sandbox().await;
    let (first, _) = rig.container(&sandbox, "first", true).await;
    let manager = rig.manager(1000, 3);
    let statuses = || rig.fake.runtime().calls(Rpc::ContainerStatus);
    let before = statuses();
    manager.rotate_logs().await.unwrap();
    assert_eq!(statuses() - before, 1, "the new container's path is asked for");
    manager.rotate_logs().await.unwrap();
    assert_eq!(statuses() - before, 1, "a known container is only measured");

    let (second, second_log) = rig.container(&sandbox, "second", true).await;
    std::fs::write(&second_log, "z".repeat(1000)).unwrap();
    let results = manager.rotate_logs().await.unwrap();
    assert_eq!(statuses() - before, 2, "only the new container is asked for");
    assert!(matches!(outcome(&results, &second), Outcome::Rotated(_)), "{results:?}");
    assert_eq!(outcome(&results, &first), &Outcome::Kept);

    // A container that stops is forgotten; one that the runtime cannot answer for is asked
    // again next round.
    rig.cri.stop_container(&first, Duration::ZERO).await.unwrap();
    let (third, _) = rig.container(&sandbox, "third", true).await;
    rig.fake.runtime().fail_next(Rpc::ContainerStatus, tonic::Status::internal("busy"));
    let results = manager.rotate_logs().await.unwrap();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(outcome(&results, &third), &Outcome::Failed);
    let results = manager.rotate_logs().await.unwrap();
    assert_eq!(outcome(&results, &third), &Outcome::Kept);
    assert_eq!(manager.lock_paths().len(), 2, "the stopped container is forgotten");
}
