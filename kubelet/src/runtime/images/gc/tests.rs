//! The pure decisions over records made by hand, and a round against the fake runtime.

use std::collections::HashMap;

use fake_cri::{FakeCriServer, Rpc};
use proto::{ClientOptions, CriClient, cri};

use super::*;

const T0: u64 = 1_800_000_000;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs)
}

fn image(id: &str, size: u64, pinned: bool) -> cri::Image {
    cri::Image { id: id.into(), size, pinned, ..Default::default() }
}

fn set(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn fs(capacity: u64, available: u64) -> FsReading {
    FsReading { capacity, available, used: capacity - available, inodes: 0, inodes_free: 0 }
}

#[test]
fn records_remember_first_detection_and_last_use_and_forget_removed_images() {
    let mut records = HashMap::new();
    let images = [image("a", 10, false), image("b", 20, false)];
    detect(&mut records, &images, &set(&["a"]), at(0));
    detect(&mut records, &images, &set(&[]), at(60));
    assert_eq!(records["a"].first_detected, at(0));
    assert_eq!(records["a"].last_used, at(0));
    assert_eq!(records["b"].last_used, SystemTime::UNIX_EPOCH, "never used");
    detect(&mut records, &images[..1], &set(&[]), at(120));
    assert!(!records.contains_key("b"), "the runtime no longer has it");
}

#[test]
fn unused_unpinned_images_old_enough_go_least_recently_used_first() {
    let mut records = HashMap::new();
    let images = [
        image("used-long-ago", 1, false),
        image("never-used", 2, false),
        image("in-use", 3, false),
        image("pinned", 4, true),
        image("used-lately", 5, false),
    ];
    detect(&mut records, &images, &set(&["used-long-ago", "in-use", "used-lately"]), at(0));
    detect(&mut records, &images, &set(&["in-use", "used-lately"]), at(100));
    let order = eviction_order(&records, &set(&["in-use"]), at(200), Duration::from_secs(120));
    let ids: Vec<&str> = order.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["never-used", "used-long-ago", "used-lately"]);
    // Images detected less than imageMinimumGCAge ago stay.
    detect(
        &mut records,
        &[images.to_vec(), vec![image("new", 6, false)]].concat(),
        &set(&[]),
        at(250),
    );
    let order = eviction_order(&records, &set(&["in-use"]), at(300), Duration::from_secs(120));
    assert!(order.iter().all(|(id, _)| id != "new"), "{order:?}");
}

#[test]
fn images_unused_beyond_the_maximum_age_are_old_and_none_are_without_one() {
    let mut records = HashMap::new();
    let images = [image("stale", 1, false), image("fresh", 1, false), image("pinned", 1, true)];
    detect(&mut records, &images, &set(&["stale", "fresh", "pinned"]), at(0));
    detect(&mut records, &images, &set(&["fresh"]), at(500));
    assert_eq!(too_old(&records, &set(&["fresh"]), at(700), Duration::from_secs(600)), ["stale"]);
    assert!(too_old(&records, &set(&[]), at(700), Duration::ZERO).is_empty());
}

#[test]
fn the_amount_to_free_brings_usage_from_the_high_to_the_low_threshold() {
    let policy = ImageGcPolicy::default();
    // 90 % used: free down to 80 %, 10 % of 1000.
    assert_eq!(amount_to_free(&fs(1000, 100), &policy).unwrap(), Some(100));
    // Upstream's integer arithmetic: 100 - 160 * 100 / 1000 = 84 %; 100 - 151 * 100 / 1000 = 85 %.
    assert_eq!(amount_to_free(&fs(1000, 160), &policy).unwrap(), None);
    assert_eq!(amount_to_free(&fs(1000, 151), &policy).unwrap(), Some(49));
    assert_eq!(amount_to_free(&fs(1000, 150), &policy).unwrap(), Some(50), "85 % used");
    assert!(matches!(amount_to_free(&fs(0, 0), &policy), Err(GcError::InvalidCapacity)));
}

#[test]
fn bad_policies_are_refused_in_upstreams_words() {
    let ok = ImageGcPolicy::default();
    assert_eq!(ok.validate(), Ok(()));
    let e = ImageGcPolicy { high_threshold_percent: 101, ..ok.clone() }.validate().unwrap_err();
    assert_eq!(
        e.1,
        "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"
    );
    let e = ImageGcPolicy { low_threshold_percent: 85, ..ok.clone() }.validate().unwrap_err();
    assert_eq!(
        e,
        ("imageGCLowThresholdPercent", "imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85".into())
    );
    let e = ImageGcPolicy { max_age: Duration::from_secs(60), ..ok }.validate().unwrap_err();
    assert_eq!(e.1, "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 2m0s");
}

struct Rig {
    _dir: tempfile::TempDir,
    fake: FakeCriServer,
    cri: CriClient,
}

impl Rig {
    async fn new(images: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        for i in images {
            fake.runtime().add_image(i).unwrap();
        }
        let cri = CriClient::connect(fake.endpoint(), ClientOptions::default()).await.unwrap();
        Self { _dir: dir, fake, cri }
    }

    fn manager(&self) -> ImageGcManager {
        ImageGcManager {
            cri: self.cri.clone(),
            policy: ImageGcPolicy { min_age: Duration::ZERO, ..ImageGcPolicy::default() },
            image_fs_dir: None,
            recorder: Recorder::default(),
            node: "node-a".into(),
            records: Default::default(),
        }
    }

    /// A container of `image` in a sandbox of its own, started or not.
    async fn container(&self, pod: &str, image: &str, start: bool) {
        let sandbox = crate::test_cri::sandbox(&self.cri, pod, None).await;
        crate::test_cri::container(&self.cri, &sandbox, "c", image, start).await;
    }

    async fn image_names(&self) -> Vec<String> {
        let images = self.cri.list_images(cri::ListImagesRequest { filter: None }).await.unwrap();
        let mut names: Vec<String> = images.images.into_iter().flat_map(|i| i.repo_tags).collect();
        names.sort();
        names
    }
}

#[tokio::test]
async fn over_the_high_threshold_unused_images_go_and_images_containers_use_never() {
    let rig = Rig::new(&["busybox:1.35", "nginx:1.8", "redis:7", "alpine:3"]).await;
    let manager = rig.manager();
    rig.container("running", "busybox:1.35", true).await;
    rig.container("created", "nginx:1.8", false).await;
    // 90 % used of 10 MB: 1 MB to free, and each fake image is 1,234,567 bytes.
    let report = manager.garbage_collect(at(0), Some(fs(10_000_000, 1_000_000))).await.unwrap();
    assert_eq!(report.freed.len(), 1, "one image frees enough: {report:?}");
    let left = rig.image_names().await;
    assert!(left.contains(&"docker.io/library/busybox:1.35".to_string()), "{left:?}");
    assert!(left.contains(&"docker.io/library/nginx:1.8".to_string()), "{left:?}");
    assert_eq!(left.len(), 3);

    // Asking for more than the unused images hold removes them all, then says so.
    let err = manager.garbage_collect(at(1), Some(fs(10_000_000, 0))).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "Failed to garbage collect required amount of images. Attempted to free 2000000 bytes, but only found 1234567 bytes eligible to free."
    );
    assert_eq!(
        rig.image_names().await,
        ["docker.io/library/busybox:1.35", "docker.io/library/nginx:1.8"]
    );
    let events = manager.recorder.list();
    let last = events.last().map(|e| (e.reason.as_str(), e.object.as_str()));
    assert_eq!(last, Some(("FreeDiskSpaceFailed", "node/node-a")));

    // Below the high threshold nothing goes.
    let report = manager.garbage_collect(at(2), Some(fs(10_000_000, 5_000_000))).await.unwrap();
    assert_eq!(report, GcReport::default());
    assert_eq!(rig.fake.runtime().calls(Rpc::RemoveImage), 2);
}
