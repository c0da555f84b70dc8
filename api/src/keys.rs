//! Label and annotation keys shared with upstream, so real tools read our state.

/// Where a pod came from: `file`, `http` or `api`.
pub const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// The hash the kubelet computed for a static pod (also its UID).
pub const CONFIG_HASH: &str = "kubernetes.io/config.hash";
/// When the kubelet first saw this version of the pod (RFC 3339 with nanoseconds).
pub const CONFIG_SEEN: &str = "kubernetes.io/config.seen";
/// On a mirror pod: the static pod's hash.
pub const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";

pub const SOURCE_FILE: &str = "file";
pub const SOURCE_HTTP: &str = "http";
pub const SOURCE_API: &str = "api";

/// CRI labels on sandboxes and containers.
pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const POD_UID: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";

/// CRI annotations on containers.
pub const CONTAINER_HASH: &str = "io.kubernetes.container.hash";
pub const CONTAINER_RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
pub const CONTAINER_TERMINATION_MESSAGE_PATH: &str =
    "io.kubernetes.container.terminationMessagePath";
pub const CONTAINER_TERMINATION_MESSAGE_POLICY: &str =
    "io.kubernetes.container.terminationMessagePolicy";
pub const CONTAINER_PORTS: &str = "io.kubernetes.container.ports";
pub const POD_TERMINATION_GRACE_PERIOD: &str = "io.kubernetes.pod.terminationGracePeriod";
pub const POD_DELETION_GRACE_PERIOD: &str = "io.kubernetes.pod.deletionGracePeriod";

/// Node labels.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
