//! Image garbage collection, as upstream's image GC manager (`pkg/kubelet/images`): every five
//! minutes (the first at start) the runtime's images are looked at, and
//! - an image unused for longer than `imageMaximumGCAge` (when set) is removed;
//! - when the image filesystem is used at `imageGCHighThresholdPercent` or more, unused images
//!   are removed, least recently used first (then first detected), until usage is back to
//!   `imageGCLowThresholdPercent`; an image detected less than `imageMinimumGCAge` ago stays.
//!   Freeing less than needed is a `FreeDiskSpaceFailed` Warning on the node.
//!
//! Never removed: an image any container uses (running or exited: the container GC removes
//! dead containers first), an image the runtime pins, and the runtime's sandbox image (read
//! from its `Status` config; containerd 1.6 does not pin it, so upstream would remove it and
//! the next pod would have to pull it). The decisions are pure ([`detect`], [`eviction_order`],
//! [`amount_to_free`], [`too_old`]); [`ImageGcManager`] runs them against the runtime.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use proto::{CallError, CriClient, cri};
use tokio_util::sync::CancellationToken;

use crate::config::duration::GoDuration;
use crate::events::{ObjectRef, Recorder};
use crate::node_status::machine::FsReading;

/// How often images are collected (upstream's `ImageGCPeriod`).
pub const PERIOD: Duration = Duration::from_secs(5 * 60);

/// `imageGC*` and `image*GCAge` of the kubelet config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// Collect at or above this percentage of the image filesystem used (85; 100: never).
    pub high_threshold_percent: i32,
    /// Collect down to this percentage (80).
    pub low_threshold_percent: i32,
    /// An image detected more recently than this is kept (2m).
    pub min_age: Duration,
    /// An image unused for longer than this is removed (0: no limit).
    pub max_age: Duration,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        Self {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(2 * 60),
            max_age: Duration::ZERO,
        }
    }
}

impl ImageGcPolicy {
    /// Upstream's checks: the field and what is wrong with it, in its words.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let (high, low) = (self.high_threshold_percent, self.low_threshold_percent);
        if !(0..=100).contains(&high) {
            return Err((
                "imageGCHighThresholdPercent",
                format!(
                    "imageGCHighThresholdPercent (--image-gc-high-threshold) {high} must be between 0 and 100, inclusive"
                ),
            ));
        }
        if !(0..=100).contains(&low) {
            return Err((
                "imageGCLowThresholdPercent",
                format!(
                    "imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be between 0 and 100, inclusive"
                ),
            ));
        }
        if low >= high {
            return Err((
                "imageGCLowThresholdPercent",
                format!(
                    "imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"
                ),
            ));
        }
        if !self.max_age.is_zero() && self.max_age <= self.min_age {
            return Err((
                "imageMaximumGCAge",
                format!(
                    "imageMaximumGCAge {} must be greater than imageMinimumGCAge {}",
                    GoDuration(self.max_age),
                    GoDuration(self.min_age)
                ),
            ));
        }
        Ok(())
    }
}

/// What is remembered of an image between rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecord {
    pub first_detected: SystemTime,
    pub last_used: SystemTime,
    pub size: u64,
    pub pinned: bool,
}

/// Updates the records from one listing: new images recorded as first seen `now`, images in
/// use marked used `now`, images the runtime no longer has forgotten.
pub fn detect(
    records: &mut HashMap<String, ImageRecord>,
    images: &[cri::Image],
    in_use: &HashSet<String>,
    now: SystemTime,
) {
    let present: HashSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
    records.retain(|id, _| present.contains(id.as_str()));
    for image in images {
        let record = records.entry(image.id.clone()).or_insert(ImageRecord {
            first_detected: now,
            last_used: SystemTime::UNIX_EPOCH,
            size: image.size,
            pinned: image.pinned,
        });
        record.size = image.size;
        record.pinned = image.pinned;
        if in_use.contains(&image.id) {
            record.last_used = now;
        }
    }
}

/// The images that may go, in the order they go: not in use, not pinned, detected at least
/// `min_age` ago; least recently used first, then first detected first.
pub fn eviction_order(
    records: &HashMap<String, ImageRecord>,
    in_use: &HashSet<String>,
    now: SystemTime,
    min_age: Duration,
) -> Vec<(String, u64)> {
    let mut candidates: Vec<(&String, &ImageRecord)> = records
        .iter()
        .filter(|(id, r)| !in_use.contains(*id) && !r.pinned)
        .filter(|(_, r)| now.duration_since(r.first_detected).unwrap_or_default() >= min_age)
        .collect();
    candidates.sort_by(|a, b| {
        (a.1.last_used, a.1.first_detected, a.0).cmp(&(b.1.last_used, b.1.first_detected, b.0))
    });
    candidates.into_iter().map(|(id, r)| (id.clone(), r.size)).collect()
}

/// The images unused for longer than `max_age` (none when it is zero).
pub fn too_old(
    records: &HashMap<String, ImageRecord>,
    in_use: &HashSet<String>,
    now: SystemTime,
    max_age: Duration,
) -> Vec<String> {
    if max_age.is_zero() {
        return Vec::new();
    }
    let mut old: Vec<String> = records
        .iter()
        .filter(|(id, r)| !in_use.contains(*id) && !r.pinned)
        .filter(|(_, r)| {
            // Never used since detected: aged from detection.
            let since = r.last_used.max(r.first_detected);
            now.duration_since(since).unwrap_or_default() > max_age
        })
        .map(|(id, _)| id.clone())
        .collect();
    old.sort();
    old
}

/// Bytes to free to bring usage from at or above the high threshold down to the low one;
/// `None` below the high threshold.
pub fn amount_to_free(fs: &FsReading, policy: &ImageGcPolicy) -> Result<Option<u64>, GcError> {
    if fs.capacity == 0 {
        return Err(GcError::InvalidCapacity);
    }
    let available = fs.available.min(fs.capacity);
    let usage_percent = 100 - i128::from(available) * 100 / i128::from(fs.capacity);
    if usage_percent < i128::from(policy.high_threshold_percent) {
        return Ok(None);
    }
    let low = i128::from(policy.low_threshold_percent);
    let target_available = i128::from(fs.capacity) * (100 - low) / 100;
    let amount = target_available - i128::from(available);
    Ok(Some(u64::try_from(amount.max(0)).unwrap_or(u64::MAX)))
}

/// Why a round failed, as upstream words it.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error(transparent)]
    Runtime(#[from] CallError),
    #[error("the runtime names no image filesystem the kubelet can read")]
    NoImageFs,
    #[error("invalid capacity 0 on image filesystem")]
    InvalidCapacity,
    #[error(
        "Failed to garbage collect required amount of images. Attempted to free {wanted} bytes, but only found {freed} bytes eligible to free."
    )]
    NotEnoughFreed { wanted: u64, freed: u64 },
}

/// What one round removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcReport {
    /// Images removed for being unused beyond `imageMaximumGCAge`.
    pub aged_out: Vec<String>,
    /// Images removed to bring usage down, with the bytes the runtime said they took.
    pub freed: Vec<String>,
    pub freed_bytes: u64,
}

/// Collects the runtime's images on [`PERIOD`].
#[derive(Debug)]
pub struct ImageGcManager {
    pub cri: CriClient,
    pub policy: ImageGcPolicy,
    /// The runtime's image filesystem (CRI `ImageFsInfo`'s mountpoint), measured each round.
    pub image_fs_dir: Option<PathBuf>,
    pub recorder: Recorder,
    pub node: String,
    /// What was seen of each image; shared by the periodic rounds and the eviction manager's
    /// [`ImageGcManager::delete_unused`].
    pub records: Mutex<HashMap<String, ImageRecord>>,
}

impl ImageGcManager {
    /// Collects at start and then every [`PERIOD`] until `stop`. A failure twice in a row is an
    /// `ImageGCFailed` Warning on the node, as upstream's (the first may be a runtime starting).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        if self.policy.high_threshold_percent >= 100 {
            tracing::info!("image garbage collection is off (imageGCHighThresholdPercent is 100)");
        }
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failed_before = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let fs = self.image_fs_dir.as_deref().and_then(FsReading::of);
            match self.garbage_collect(SystemTime::now(), fs).await {
                Ok(report) => {
                    failed_before = false;
                    if !report.freed.is_empty() || !report.aged_out.is_empty() {
                        tracing::info!(?report, "image garbage collection removed images");
                    }
                }
                Err(e) if failed_before => {
                    tracing::error!(error = %e, "image garbage collection failed multiple times in a row");
                    self.recorder.warning(
                        &ObjectRef::Node(self.node.clone()),
                        "ImageGCFailed",
                        e.to_string(),
                    );
                }
                Err(e) => {
                    failed_before = true;
                    tracing::warn!(error = %e, "image garbage collection failed once");
                }
            }
        }
    }

    /// One round at `now`, the image filesystem measured as `fs`.
    pub async fn garbage_collect(
        &self,
        now: SystemTime,
        fs: Option<FsReading>,
    ) -> Result<GcReport, GcError> {
        let mut report = GcReport::default();
        let in_use = self.detect(now).await?;
        let old = too_old(&self.lock(), &in_use, now, self.policy.max_age);
        for id in old {
            tracing::info!(image = %id, max_age = ?self.policy.max_age, "removing an image unused for longer than imageMaximumGCAge");
            if self.remove(&id).await {
                report.aged_out.push(id);
            }
        }
        if self.policy.high_threshold_percent >= 100 {
            return Ok(report);
        }
        let fs = fs.ok_or(GcError::NoImageFs)?;
        let amount = match amount_to_free(&fs, &self.policy) {
            Ok(Some(amount)) => amount,
            Ok(None) => return Ok(report),
            Err(e) => {
                self.recorder.warning(
                    &ObjectRef::Node(self.node.clone()),
                    "InvalidDiskCapacity",
                    e.to_string(),
                );
                return Err(e);
            }
        };
        tracing::info!(
            usage = fs.capacity - fs.available.min(fs.capacity),
            capacity = fs.capacity,
            amount,
            "image filesystem usage is over the high threshold; freeing down to the low threshold"
        );
        let order = eviction_order(&self.lock(), &in_use, now, self.policy.min_age);
        for (id, size) in order {
            if report.freed_bytes >= amount {
                break;
            }
            if self.remove(&id).await {
                report.freed.push(id);
                report.freed_bytes += size;
            }
        }
        if report.freed_bytes < amount {
            let e = GcError::NotEnoughFreed { wanted: amount, freed: report.freed_bytes };
            self.recorder.warning(
                &ObjectRef::Node(self.node.clone()),
                "FreeDiskSpaceFailed",
                e.to_string(),
            );
            return Err(e);
        }
        Ok(report)
    }

    /// Removes every unused image old enough (upstream's `DeleteUnusedImages`, the eviction
    /// manager's reclaim under disk pressure); returns the bytes the runtime said they took.
    pub async fn delete_unused(&self, now: SystemTime) -> Result<u64, GcError> {
        let in_use = self.detect(now).await?;
        let order = eviction_order(&self.lock(), &in_use, now, self.policy.min_age);
        let mut freed = 0;
        for (id, size) in order {
            if self.remove(&id).await {
                freed += size;
            }
        }
        Ok(freed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ImageRecord>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists the images and updates the records at `now`; returns the ids in use.
    async fn detect(&self, now: SystemTime) -> Result<HashSet<String>, CallError> {
        let (images, in_use) = self.inventory().await?;
        detect(&mut self.lock(), &images, &in_use, now);
        Ok(in_use)
    }

    /// The runtime's images, and the ids of those that must stay: used by a container
    /// (any state), or the runtime's sandbox image.
    async fn inventory(&self) -> Result<(Vec<cri::Image>, HashSet<String>), CallError> {
        let images = self.cri.list_images(cri::ListImagesRequest { filter: None }).await?.images;
        let containers =
            self.cri.list_containers(cri::ListContainersRequest { filter: None }).await?.containers;
        let mut names: HashSet<String> = HashSet::new();
        for c in containers {
            names.insert(c.image_ref);
            if let Some(spec) = c.image {
                names.insert(spec.image);
            }
        }
        if let Some(sandbox) = self.sandbox_image().await {
            names.insert(sandbox);
        }
        let in_use = images
            .iter()
            .filter(|i| {
                names.contains(&i.id)
                    || i.repo_tags.iter().chain(&i.repo_digests).any(|n| names.contains(n))
            })
            .map(|i| i.id.clone())
            .collect();
        Ok((images, in_use))
    }

    /// The image the runtime makes sandboxes from, as its verbose `Status` config names it
    /// (containerd's `sandboxImage`); `None` when it does not say.
    async fn sandbox_image(&self) -> Option<String> {
        let status = self.cri.status(cri::StatusRequest { verbose: true }).await.ok()?;
        let config: serde_json::Value = serde_json::from_str(status.info.get("config")?).ok()?;
        config["sandboxImage"].as_str().filter(|s| !s.is_empty()).map(str::to_string)
    }

    /// Removes an image; a failure is logged and the image skipped, as upstream goes on to the
    /// next one.
    async fn remove(&self, id: &str) -> bool {
        let spec = cri::ImageSpec { image: id.to_string(), ..Default::default() };
        match self.cri.remove_image(cri::RemoveImageRequest { image: Some(spec) }).await {
            Ok(_) => {
                tracing::info!(image = %id, "removed an image");
                self.lock().remove(id);
                true
            }
            Err(e) => {
                tracing::warn!(image = %id, error = %e, "removing an image");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests;
