//! Making sure a container's image is present, by its pull policy, with ImagePullBackOff after
//! failures (upstream's `EnsureImageExists`), recording upstream's events: `Pulling`, `Pulled`
//! (pulled, or already present), `Failed`, `BackOff`, `ErrImageNeverPull`, `InspectFailed`,
//! and `FailedToRetrieveImagePullSecret` on the pod.
//!
//! A pull uses the credentials [`crate::credentialprovider`] finds for the image: the pod's
//! image pull secrets' (fetched when a pull is due), then the node's own; each is tried in
//! turn until one works, and with none the pull goes without.
//!
//! [`gc`]: the images the node no longer needs removed, as upstream's image GC manager.

pub mod gc;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use proto::{CriClient, cri};

use super::backoff::Backoff;
use super::pull_secrets::{self, SecretSource};
use crate::credentialprovider::{self, Entry, NodeKeyring, secrets::SecretError};
use crate::events::{ObjectRef, Recorder};
use crate::metrics::KubeletMetrics;

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
    #[error("Failed to pull image {image:?} for pod {pod:?}: {source}")]
    PullSecret { image: String, pod: String, source: SecretError },
}

impl ImageError {
    /// The container's waiting reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ImageError::NeverPull { .. } => "ErrImageNeverPull",
            ImageError::BackOff { .. } => "ImagePullBackOff",
            ImageError::Pull { .. }
            | ImageError::Inspect { .. }
            | ImageError::PullSecret { .. } => "ErrImagePull",
        }
    }
}

/// Pulls images for pods, one pull per image at a time.
#[derive(Debug)]
pub struct ImageManager {
    backoff: Mutex<Backoff>,
    last_errors: Mutex<HashMap<String, String>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The node's own registry credentials.
    node: NodeKeyring,
    /// Where pull secrets come from (`None`: no apiserver).
    secrets: Option<Arc<dyn SecretSource>>,
    /// Told when a pod's pulls start and end (its startup latency leaves them out).
    metrics: Option<Arc<KubeletMetrics>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where an image's events go: the container that needs it.
struct Events<'a> {
    recorder: &'a Recorder,
    object: &'a ObjectRef,
}

impl Events<'_> {
    fn normal(&self, reason: &str, message: String) {
        self.recorder.normal(self.object, reason, message);
    }

    fn warning(&self, reason: &str, message: String) {
        self.recorder.warning(self.object, reason, message);
    }

    /// Upstream's message for an image already there (with `KubeletEnsureSecretPulledImages`,
    /// on by default in 1.35). This kubelet keeps no pull records yet, so it does not verify
    /// that a pod may use an image another pod pulled with credentials (see ARCHITECTURE.md).
    fn present(&self, image: &str) {
        let message = format!(
            "Container image {image:?} already present on machine and can be accessed by the pod"
        );
        self.normal("Pulled", message);
    }
}

/// Upstream's `applyDefaultImageTag`: a reference without tag or digest means `:latest`.
fn with_default_tag(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') || last.contains(':') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// A duration as upstream prints it: Go's `time.Duration` after `Truncate(time.Millisecond)`
/// (`523ms`, `1.5s`, `2m3.25s`, `1h0m0s`).
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return if ms == 0 { "0s".into() } else { format!("{ms}ms") };
    }
    let (secs, frac) = (ms / 1000, ms % 1000);
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let s = if frac == 0 {
        s.to_string()
    } else {
        format!("{s}.{}", format!("{frac:03}").trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// Upstream's aggregate error text: one error alone, several in brackets (repeats once).
fn aggregate(errors: &[String]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for e in errors {
        if !distinct.contains(&e.as_str()) {
            distinct.push(e);
        }
    }
    match distinct.as_slice() {
        [one] => (*one).to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn auth_config(e: Entry) -> cri::AuthConfig {
    cri::AuthConfig { username: e.username, password: e.password, ..Default::default() }
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

impl ImageManager {
    pub fn new(node: NodeKeyring, secrets: Option<Arc<dyn SecretSource>>) -> Self {
        Self {
            backoff: Mutex::new(Backoff::new(Duration::from_secs(10), Duration::from_secs(300))),
            last_errors: Mutex::default(),
            locks: Mutex::default(),
            node,
            secrets,
            metrics: None,
        }
    }

    /// This manager, telling `metrics` when pods' pulls start and end.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<KubeletMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The credentials to try for `image`, in order (upstream's `MakeDockerKeyring` and
    /// `Lookup`): pull secrets that cannot be had are named in a
    /// `FailedToRetrieveImagePullSecret` event and left out; one that does not parse fails.
    async fn credentials(
        &self,
        recorder: &Recorder,
        pod: &Pod,
        image: &str,
    ) -> Result<Vec<Entry>, SecretError> {
        let secrets = pull_secrets::fetch(self.secrets.as_ref(), pod).await;
        if !secrets.failed.is_empty() {
            let message = format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                secrets.failed.join(", ")
            );
            recorder.warning(&ObjectRef::pod(pod), "FailedToRetrieveImagePullSecret", message);
        }
        let from_secrets = credentialprovider::secrets::keyring(&secrets.found)?;
        let node = self.node.keyring(tokio::time::Instant::now());
        Ok(credentialprovider::lookup(from_secrets.as_ref(), &node, image))
    }

    /// A failed pull: its `Failed` event saying `message`, and the backoff before the next
    /// (whose message repeats `error`).
    fn failed(&self, key: String, events: &Events<'_>, message: String, error: String) {
        events.warning("Failed", message);
        lock(&self.backoff).next(&key, SystemTime::now());
        lock(&self.last_errors).insert(key, error);
    }

    async fn present(
        cri: &CriClient,
        image: &str,
        events: &Events<'_>,
    ) -> Result<Option<String>, ImageError> {
        let spec = Some(cri::ImageSpec { image: image.to_string(), ..Default::default() });
        let status =
            cri.image_status(cri::ImageStatusRequest { image: spec, verbose: false }).await;
        status.map(|s| s.image.map(|i| i.id)).map_err(|e| {
            let error = e.to_string();
            events.warning("InspectFailed", format!("Failed to inspect image {image:?}: {error}"));
            ImageError::Inspect { image: image.to_string(), error }
        })
    }

    /// The size the runtime reports for a pulled image (0 if it cannot say).
    async fn size(cri: &CriClient, image_ref: &str) -> u64 {
        let spec = Some(cri::ImageSpec { image: image_ref.to_string(), ..Default::default() });
        let status =
            cri.image_status(cri::ImageStatusRequest { image: spec, verbose: false }).await;
        status.ok().and_then(|s| s.image).map_or(0, |i| i.size)
    }

    /// Returns the image id to create the container of `pod` from, pulling as `policy` says;
    /// what happens is recorded as events about `object`.
    pub async fn ensure(
        &self,
        cri: &CriClient,
        recorder: &Recorder,
        object: &ObjectRef,
        pod: &Pod,
        image: &str,
        policy: &str,
    ) -> Result<String, ImageError> {
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let events = Events { recorder, object };
        let key = format!("{pod_uid}_{image}");
        if policy != "Always" {
            if let Some(id) = Self::present(cri, image, &events).await? {
                events.present(image);
                return Ok(id);
            }
            if policy == "Never" {
                let error = ImageError::NeverPull { image: image.to_string() };
                events.warning("ErrImageNeverPull", error.to_string());
                return Err(error);
            }
        }
        let tagged = with_default_tag(image);
        if let Some(err) = self.in_backoff(&key, image) {
            events.normal("BackOff", format!("Back-off pulling image {tagged:?}"));
            return Err(err);
        }
        let auths = match self.credentials(recorder, pod, image).await {
            Ok(auths) => auths,
            Err(source) => {
                let error =
                    ImageError::PullSecret { image: image.to_string(), pod: pod_name(pod), source };
                self.failed(key, &events, error.to_string(), error.to_string());
                return Err(error);
            }
        };
        events.normal("Pulling", format!("Pulling image {tagged:?}"));
        if let Some(m) = &self.metrics {
            m.pod_starts.pulling(pod_uid, SystemTime::now());
        }
        let started = Instant::now();
        let image_lock = lock(&self.locks).entry(image.to_string()).or_default().clone();
        let _pulling = match image_lock.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                let guard = image_lock.lock().await;
                // Another pod was pulling the same image: it may be here now.
                if policy != "Always"
                    && let Some(id) = Self::present(cri, image, &events).await?
                {
                    events.present(image);
                    return Ok(id);
                }
                guard
            }
        };
        if auths.is_empty() {
            tracing::debug!(image, "pulling the image without credentials");
        }
        let attempts: Vec<Option<cri::AuthConfig>> = if auths.is_empty() {
            vec![None]
        } else {
            auths.into_iter().map(|e| Some(auth_config(e))).collect()
        };
        let pulling = Instant::now();
        let spec = Some(cri::ImageSpec { image: image.to_string(), ..Default::default() });
        let mut errors = Vec::new();
        let mut pulled = None;
        for auth in attempts {
            let request = cri::PullImageRequest { image: spec.clone(), auth, sandbox_config: None };
            match cri.pull_image(request).await {
                Ok(r) => {
                    pulled = Some(r);
                    break;
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        if let Some(m) = &self.metrics {
            m.pod_starts.pulled(pod_uid, SystemTime::now());
        }
        match pulled.ok_or_else(|| aggregate(&errors)) {
            Ok(r) => {
                let pull = pulling.elapsed();
                lock(&self.backoff).reset(&key);
                lock(&self.last_errors).remove(&key);
                let size = Self::size(cri, &r.image_ref).await;
                let message = format!(
                    "Successfully pulled image {tagged:?} in {} ({} including waiting). Image size: {size} bytes.",
                    go_duration(pull),
                    go_duration(started.elapsed()),
                );
                events.normal("Pulled", message);
                Ok(r.image_ref)
            }
            Err(error) => {
                let message = format!("Failed to pull image {tagged:?}: {error}");
                self.failed(key, &events, message, error.clone());
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

#[cfg(test)]
mod tests;
