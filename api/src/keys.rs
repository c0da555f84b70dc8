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

/// The node taints upstream's node lifecycle controller and kubelet conditions stand for.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// Job pod template labels and the generated selector (the prefixed ones since 1.27, the
/// legacy ones kept beside them).
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";
pub const JOB_CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
pub const LEGACY_JOB_NAME: &str = "job-name";
pub const LEGACY_JOB_CONTROLLER_UID: &str = "controller-uid";

/// A DaemonSet's template generation (`spec.templateGeneration` of the internal type, kept in
/// this annotation by apps/v1).
pub const DAEMONSET_TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// Ours, on a mirror pod: the static pod's references to node-local ConfigMaps and Secrets
/// (volumes, their mounts, `env` and `envFrom` entries), which the mirror leaves out because
/// the apiserver refuses mirror pods that reference ConfigMaps or Secrets (upstream's
/// NodeRestriction); JSON, as [`STATIC_CONFIG`]'s writer documents.
pub const STATIC_CONFIG: &str = "kubelet-rs.io/static-config";

/// Ours, on a static pod (and so on its sandbox and mirror): `v1:<digest>` of what must stay
/// the same for an edited manifest to keep the pod's UID, the fields an API pod cannot change
/// (all but labels, annotations, images, `activeDeadlineSeconds` and tolerations). The version
/// says which fields were compared, so a later build can read what an older one recorded.
pub const STATIC_IDENTITY: &str = "kubelet-rs.io/identity";

/// Ours, on a static pod and its mirror: a digest of the manifest's whole content, which
/// changes with every edit, so a mirror is replaced when a label or image changes while the
/// static pod keeps its UID.
pub const STATIC_CONTENT: &str = "kubelet-rs.io/content-hash";

/// Ours, on a pod: the static pods of its node (`name` or `namespace/name`, comma-separated)
/// that must be Ready before it first starts.
pub const STATIC_AFTER: &str = "kubelet-rs.io/after";

/// Ours, on a pod: its containers' first crash back-off and the most it grows to (Go
/// durations, each between 1s and 300s), instead of upstream's 10s doubling to 300s
/// ([`crate::restart_backoff`]).
pub const CRASH_BACKOFF_INITIAL: &str = "kubelet-rs.io/crash-loop-backoff-initial";
pub const CRASH_BACKOFF_MAX: &str = "kubelet-rs.io/crash-loop-backoff-max";

/// Ours, on a container the kubelet restarted: the crash back-off in force when it was
/// started (a Go duration), which a restarted kubelet takes up for the container's next restart.
pub const CONTAINER_RESTART_BACKOFF: &str = "kubelet-rs.io/restart-backoff";
