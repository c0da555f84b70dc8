//! Pod sources and their merge, as upstream's `pkg/kubelet/config`.
//!
//! - [`kubelet_config`]: the `KubeletConfiguration` subset and its defaults.
//! - [`duration`]: Go-style durations in config files.
//! - [`syntax`]: manifest text to JSON values (a byte-order mark dropped, repeated keys refused).
//! - [`manifest`]: reading one static pod manifest.
//! - [`dir`]: a watched directory's files and the rules for reading them; [`dir_watch`]: its
//!   inotify watch and rescans (both shared with the node-local object source).
//! - [`file`]: the static pod directory source; [`identity`]: which UID a static pod runs
//!   under (kept across in-place edits, adopted from the runtime at start); [`checkpoint`]:
//!   each manifest's last good version on disk, for a restart while it is invalid.
//! - [`http`]: the manifest URL source (`staticPodURL`): a pod or a list of pods fetched
//!   every `httpCheckFrequency`.
//! - [`apiserver`]: pods bound to this node, from the apiserver.
//! - [`mux`]: merges sources into `PodUpdate`s (ADD, UPDATE, REMOVE, RECONCILE, DELETE).

pub mod apiserver;
pub mod checkpoint;
pub mod dir;
pub mod dir_watch;
pub use api::duration;
pub mod file;
pub mod http;
pub mod identity;
pub mod kubelet_config;
pub mod manifest;
pub mod mux;
pub mod syntax;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// Where pods come from (the value of `kubernetes.io/config.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    File,
    /// The manifest URL (`staticPodURL`).
    Http,
    Api,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::File => api::keys::SOURCE_FILE,
            Source::Http => api::keys::SOURCE_HTTP,
            Source::Api => api::keys::SOURCE_API,
        }
    }

    /// The source's value of `kubernetes.io/config.source`, read back.
    pub fn parse(value: &str) -> Option<Self> {
        [Source::File, Source::Http, Source::Api].into_iter().find(|s| s.as_str() == value)
    }

    /// Upstream's `IsStaticPod`: pods from any source but the apiserver (files and the
    /// manifest URL) are static, mirrored to the apiserver, and may reference only the
    /// node-local objects.
    pub fn is_static(self) -> bool {
        self != Source::Api
    }
}

/// A source's complete current set of pods (upstream's SET operation).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSet {
    pub source: Source,
    pub pods: Vec<Pod>,
}

/// What changed, per source, as the sync loop consumes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// New pods.
    Add,
    /// Pods whose spec, labels or annotations changed.
    Update,
    /// Pods gone from their source: terminate them.
    Remove,
    /// Pods whose status alone differs.
    Reconcile,
    /// Pods being deleted gracefully (deletionTimestamp set).
    Delete,
}

#[derive(Debug, Clone)]
pub struct PodUpdate {
    pub op: Op,
    pub source: Source,
    pub pods: Vec<Arc<Pod>>,
}
