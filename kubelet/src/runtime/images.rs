//! Making sure a container's image is present, by its pull policy, with ImagePullBackOff after
//! failures (upstream's `EnsureImageExists`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use proto::{CriClient, cri};

use super::backoff::Backoff;

/// Why an image is not there, with the reason a container status shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("Container image {image:?} is not present with pull policy of Never")]
    NeverPull { image: String },
    #[error("Back-off pulling image {image:?}: {last_error}")]
    BackOff { image: String, last_error: String },
    #[error("Failed to pull image {image:?}: {error}")]
    Pull { image: String, error: String },
    #[error("Failed to inspect image {image:?}: {error}")]
    Inspect { image: String, error: String },
}

impl ImageError {
    /// The container's waiting reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ImageError::NeverPull { .. } => "ErrImageNeverPull",
            ImageError::BackOff { .. } => "ImagePullBackOff",
            ImageError::Pull { .. } | ImageError::Inspect { .. } => "ErrImagePull",
        }
    }
}

/// Pulls images for pods, one pull per image at a time.
#[derive(Debug)]
pub struct ImageManager {
    backoff: Mutex<Backoff>,
    last_errors: Mutex<HashMap<String, String>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Default for ImageManager {
    fn default() -> Self {
        Self {
            backoff: Mutex::new(Backoff::new(Duration::from_secs(10), Duration::from_secs(300))),
            last_errors: Mutex::default(),
            locks: Mutex::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ImageManager {
    async fn present(cri: &CriClient, image: &str) -> Result<Option<String>, ImageError> {
        let spec = Some(cri::ImageSpec { image: image.to_string(), ..Default::default() });
        let status =
            cri.image_status(cri::ImageStatusRequest { image: spec, verbose: false }).await;
        status
            .map(|s| s.image.map(|i| i.id))
            .map_err(|e| ImageError::Inspect { image: image.to_string(), error: e.to_string() })
    }

    /// Returns the image id to create the container from, pulling as `policy` says.
    pub async fn ensure(
        &self,
        cri: &CriClient,
        pod_uid: &str,
        image: &str,
        policy: &str,
    ) -> Result<String, ImageError> {
        let key = format!("{pod_uid}_{image}");
        if policy != "Always" {
            if let Some(id) = Self::present(cri, image).await? {
                return Ok(id);
            }
            if policy == "Never" {
                return Err(ImageError::NeverPull { image: image.to_string() });
            }
        }
        if let Some(err) = self.in_backoff(&key, image) {
            return Err(err);
        }
        let image_lock = lock(&self.locks).entry(image.to_string()).or_default().clone();
        let _pulling = match image_lock.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                let guard = image_lock.lock().await;
                // Another pod was pulling the same image: it may be here now.
                if policy != "Always"
                    && let Some(id) = Self::present(cri, image).await?
                {
                    return Ok(id);
                }
                guard
            }
        };
        let spec = Some(cri::ImageSpec { image: image.to_string(), ..Default::default() });
        match cri
            .pull_image(cri::PullImageRequest { image: spec, auth: None, sandbox_config: None })
            .await
        {
            Ok(r) => {
                lock(&self.backoff).reset(&key);
                lock(&self.last_errors).remove(&key);
                tracing::info!(image, "pulled image");
                Ok(r.image_ref)
            }
            Err(e) => {
                let error = e.to_string();
                lock(&self.backoff).next(&key, SystemTime::now());
                lock(&self.last_errors).insert(key, error.clone());
                Err(ImageError::Pull { image: image.to_string(), error })
            }
        }
    }

    /// The ImagePullBackOff error while the last failed pull's delay runs.
    fn in_backoff(&self, key: &str, image: &str) -> Option<ImageError> {
        let last_error = lock(&self.last_errors).get(key).cloned()?;
        lock(&self.backoff)
            .remaining_since_last(key, SystemTime::now())
            .map(|_| ImageError::BackOff { image: image.to_string(), last_error })
    }

    /// When the pull of `image` for `pod_uid` may be retried.
    pub fn retry_after(&self, pod_uid: &str, image: &str) -> Option<Duration> {
        lock(&self.backoff).remaining_since_last(&format!("{pod_uid}_{image}"), SystemTime::now())
    }

    pub fn gc(&self) {
        lock(&self.locks).retain(|_, l| Arc::strong_count(l) > 1);
        lock(&self.backoff).gc(SystemTime::now());
        let backoff = lock(&self.backoff);
        lock(&self.last_errors).retain(|k, _| backoff.delay(k).is_some());
    }
}
