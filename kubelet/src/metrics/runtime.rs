//! `kubelet_runtime_operations_*`, as upstream's instrumented runtime and image services: every
//! CRI call counted, timed and, when it fails, counted as an error, by its operation type. The
//! one place that sees every call is the CRI client: this is its [`proto::CallObserver`].

use std::time::Duration;

use super::text::Family;
use super::types::{Counter, Histogram, Labeled, exponential_buckets};

/// Upstream's `operation_type` of a CRI RPC (its instrumented services' names).
pub fn operation_type(rpc: &'static str) -> &'static str {
    match rpc {
        "Version" => "version",
        "Status" => "status",
        "RunPodSandbox" => "run_podsandbox",
        "StopPodSandbox" => "stop_podsandbox",
        "RemovePodSandbox" => "remove_podsandbox",
        "PodSandboxStatus" => "podsandbox_status",
        "ListPodSandbox" => "list_podsandbox",
        "CreateContainer" => "create_container",
        "StartContainer" => "start_container",
        "StopContainer" => "stop_container",
        "RemoveContainer" => "remove_container",
        "ListContainers" => "list_containers",
        "ContainerStatus" => "container_status",
        "UpdateContainerResources" => "update_container",
        "ReopenContainerLog" => "reopen_container_log",
        "ExecSync" => "exec_sync",
        "Exec" => "exec",
        "Attach" => "attach",
        "PortForward" => "port_forward",
        "ContainerStats" => "container_stats",
        "ListContainerStats" => "list_container_stats",
        "PodSandboxStats" => "podsandbox_stats",
        "ListPodSandboxStats" => "list_podsandbox_stats",
        "UpdateRuntimeConfig" => "update_runtime_config",
        "RuntimeConfig" => "runtime_config",
        "GetContainerEvents" => "get_container_events",
        "ListImages" => "list_images",
        "ImageStatus" => "image_status",
        "PullImage" => "pull_image",
        "RemoveImage" => "remove_image",
        "ImageFsInfo" => "image_fs_info",
        other => other,
    }
}

/// The three runtime operation families.
#[derive(Debug)]
pub struct RuntimeOperations {
    pub total: Labeled<Counter>,
    pub duration: Labeled<Histogram>,
    pub errors: Labeled<Counter>,
}

impl Default for RuntimeOperations {
    fn default() -> Self {
        Self {
            total: Labeled::new(
                "kubelet_runtime_operations_total",
                "[ALPHA] Cumulative number of runtime operations by operation type.",
                &["operation_type"],
            ),
            duration: Labeled::with_buckets(
                "kubelet_runtime_operations_duration_seconds",
                "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.",
                &["operation_type"],
                &exponential_buckets(0.005, 2.5, 14),
            ),
            errors: Labeled::new(
                "kubelet_runtime_operations_errors_total",
                "[ALPHA] Cumulative number of runtime operation errors by operation type.",
                &["operation_type"],
            ),
        }
    }
}

impl RuntimeOperations {
    pub fn families(&self) -> Vec<Family> {
        vec![self.total.family(), self.duration.family(), self.errors.family()]
    }
}

impl proto::CallObserver for RuntimeOperations {
    fn observe(&self, rpc: &'static str, elapsed: Duration, failed: bool) {
        let op = [operation_type(rpc)];
        self.total.with(&op).inc();
        self.duration.with(&op).observe_duration(elapsed);
        if failed {
            self.errors.with(&op).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fake_cri::{FakeCriServer, Rpc};
    use proto::CallObserver;
    use std::sync::Arc;

    #[tokio::test]
    async fn every_cri_call_through_an_observed_client_is_counted_timed_and_its_errors_counted() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        let ops = Arc::new(RuntimeOperations::default());
        let cri = proto::CriClient::connect(fake.endpoint(), Default::default())
            .await
            .unwrap()
            .observed_by(ops.clone());
        let list = || cri.list_pod_sandbox(proto::cri::ListPodSandboxRequest { filter: None });
        list().await.unwrap();
        list().await.unwrap();
        fake.runtime().fail_next(Rpc::ListPodSandbox, tonic::Status::unavailable("restarting"));
        assert!(list().await.is_err());
        let count = |v: &Labeled<Counter>, op| v.get(&[op]).map_or(0, |c| c.get());
        assert_eq!(count(&ops.total, "list_podsandbox"), 3);
        assert_eq!(count(&ops.errors, "list_podsandbox"), 1);
        assert_eq!(ops.duration.get(&["list_podsandbox"]).map(|h| h.count()), Some(3));
        assert_eq!(count(&ops.total, "version"), 0, "the connect's Version is not observed");
    }

    #[test]
    fn operation_types_are_upstream_names() {
        assert_eq!(operation_type("RunPodSandbox"), "run_podsandbox");
        assert_eq!(operation_type("UpdateContainerResources"), "update_container");
        assert_eq!(operation_type("ImageFsInfo"), "image_fs_info");
        let ops = RuntimeOperations::default();
        ops.observe("PullImage", Duration::from_millis(20), false);
        let text = super::super::text::encode(ops.families());
        assert!(
            text.contains("kubelet_runtime_operations_duration_seconds_bucket{operation_type=\"pull_image\",le=\"0.03125\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("kubelet_runtime_operations_errors_total"), "{text}");
    }
}
