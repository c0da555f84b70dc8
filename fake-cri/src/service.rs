//! The gRPC services: each RPC passes the fault gate, then runs the operation in `runtime`.

use std::collections::HashMap;
use std::pin::Pin;
use std::time::Duration;

use proto::cri;
use proto::cri::image_service_server::ImageService;
use proto::cri::runtime_service_server::RuntimeService;
use tokio::sync::broadcast::error::RecvError;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::runtime::now_ns;
use crate::{FakeRuntime, Rpc, lock};

type Reply<T> = Result<Response<T>, Status>;

/// What the fake reports as its name in `Version` (and so in `crictl version`).
pub const RUNTIME_NAME: &str = "fake-cri";

impl FakeRuntime {
    async fn gate(&self, rpc: Rpc) -> Result<(), Status> {
        let (delay, failure) = lock(&self.inner.faults).admit(rpc);
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        failure.map_or(Ok(()), Err)
    }
}

fn unimplemented<T>(rpc: &str) -> Reply<T> {
    Err(Status::unimplemented(format!("fake-cri does not implement {rpc}")))
}

#[tonic::async_trait]
impl RuntimeService for FakeRuntime {
    async fn version(&self, _: Request<cri::VersionRequest>) -> Reply<cri::VersionResponse> {
        self.gate(Rpc::Version).await?;
        Ok(Response::new(cri::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: RUNTIME_NAME.into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            runtime_api_version: "v1".into(),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        r: Request<cri::RunPodSandboxRequest>,
    ) -> Reply<cri::RunPodSandboxResponse> {
        self.gate(Rpc::RunPodSandbox).await?;
        let pod_sandbox_id = self.run_pod_sandbox(r.into_inner().config)?;
        Ok(Response::new(cri::RunPodSandboxResponse { pod_sandbox_id }))
    }

    async fn stop_pod_sandbox(
        &self,
        r: Request<cri::StopPodSandboxRequest>,
    ) -> Reply<cri::StopPodSandboxResponse> {
        self.gate(Rpc::StopPodSandbox).await?;
        self.stop_pod_sandbox(&r.get_ref().pod_sandbox_id)?;
        Ok(Response::new(cri::StopPodSandboxResponse {}))
    }

    async fn remove_pod_sandbox(
        &self,
        r: Request<cri::RemovePodSandboxRequest>,
    ) -> Reply<cri::RemovePodSandboxResponse> {
        self.gate(Rpc::RemovePodSandbox).await?;
        self.remove_pod_sandbox(&r.get_ref().pod_sandbox_id)?;
        Ok(Response::new(cri::RemovePodSandboxResponse {}))
    }

    async fn pod_sandbox_status(
        &self,
        r: Request<cri::PodSandboxStatusRequest>,
    ) -> Reply<cri::PodSandboxStatusResponse> {
        self.gate(Rpc::PodSandboxStatus).await?;
        let mut resp = self.pod_sandbox_status(&r.get_ref().pod_sandbox_id)?;
        if !r.get_ref().verbose {
            resp.info.clear();
        }
        Ok(Response::new(resp))
    }

    async fn list_pod_sandbox(
        &self,
        r: Request<cri::ListPodSandboxRequest>,
    ) -> Reply<cri::ListPodSandboxResponse> {
        self.gate(Rpc::ListPodSandbox).await?;
        Ok(Response::new(cri::ListPodSandboxResponse {
            items: self.list_pod_sandbox(r.get_ref().filter.as_ref()),
        }))
    }

    async fn create_container(
        &self,
        r: Request<cri::CreateContainerRequest>,
    ) -> Reply<cri::CreateContainerResponse> {
        self.gate(Rpc::CreateContainer).await?;
        let container_id = self.create_container(r.into_inner())?;
        Ok(Response::new(cri::CreateContainerResponse { container_id }))
    }

    async fn start_container(
        &self,
        r: Request<cri::StartContainerRequest>,
    ) -> Reply<cri::StartContainerResponse> {
        self.gate(Rpc::StartContainer).await?;
        self.start_container(&r.get_ref().container_id)?;
        Ok(Response::new(cri::StartContainerResponse {}))
    }

    async fn stop_container(
        &self,
        r: Request<cri::StopContainerRequest>,
    ) -> Reply<cri::StopContainerResponse> {
        self.gate(Rpc::StopContainer).await?;
        let timeout = Duration::from_secs(u64::try_from(r.get_ref().timeout).unwrap_or(0));
        self.stop_container(&r.get_ref().container_id, timeout).await?;
        Ok(Response::new(cri::StopContainerResponse {}))
    }

    async fn remove_container(
        &self,
        r: Request<cri::RemoveContainerRequest>,
    ) -> Reply<cri::RemoveContainerResponse> {
        self.gate(Rpc::RemoveContainer).await?;
        self.remove_container(&r.get_ref().container_id)?;
        Ok(Response::new(cri::RemoveContainerResponse {}))
    }

    async fn list_containers(
        &self,
        r: Request<cri::ListContainersRequest>,
    ) -> Reply<cri::ListContainersResponse> {
        self.gate(Rpc::ListContainers).await?;
        Ok(Response::new(cri::ListContainersResponse {
            containers: self.list_containers(r.get_ref().filter.as_ref()),
        }))
    }

    async fn container_status(
        &self,
        r: Request<cri::ContainerStatusRequest>,
    ) -> Reply<cri::ContainerStatusResponse> {
        self.gate(Rpc::ContainerStatus).await?;
        let mut resp = self.container_status(&r.get_ref().container_id)?;
        if !r.get_ref().verbose {
            resp.info.clear();
        }
        Ok(Response::new(resp))
    }

    async fn update_container_resources(
        &self,
        _: Request<cri::UpdateContainerResourcesRequest>,
    ) -> Reply<cri::UpdateContainerResourcesResponse> {
        unimplemented("UpdateContainerResources")
    }

    async fn reopen_container_log(
        &self,
        r: Request<cri::ReopenContainerLogRequest>,
    ) -> Reply<cri::ReopenContainerLogResponse> {
        self.gate(Rpc::ReopenContainerLog).await?;
        self.reopen_container_log(&r.get_ref().container_id)?;
        Ok(Response::new(cri::ReopenContainerLogResponse {}))
    }

    async fn exec_sync(&self, r: Request<cri::ExecSyncRequest>) -> Reply<cri::ExecSyncResponse> {
        self.gate(Rpc::ExecSync).await?;
        Ok(Response::new(self.exec_sync(r.get_ref())?))
    }

    async fn exec(&self, _: Request<cri::ExecRequest>) -> Reply<cri::ExecResponse> {
        unimplemented("Exec (it has no streaming server)")
    }

    async fn attach(&self, _: Request<cri::AttachRequest>) -> Reply<cri::AttachResponse> {
        unimplemented("Attach (it has no streaming server)")
    }

    async fn port_forward(
        &self,
        _: Request<cri::PortForwardRequest>,
    ) -> Reply<cri::PortForwardResponse> {
        unimplemented("PortForward (it has no streaming server)")
    }

    async fn container_stats(
        &self,
        _: Request<cri::ContainerStatsRequest>,
    ) -> Reply<cri::ContainerStatsResponse> {
        unimplemented("ContainerStats")
    }

    async fn list_container_stats(
        &self,
        r: Request<cri::ListContainerStatsRequest>,
    ) -> Reply<cri::ListContainerStatsResponse> {
        self.gate(Rpc::ListContainerStats).await?;
        let stats = lock(&self.inner.store).container_stats(r.get_ref().filter.as_ref());
        Ok(Response::new(cri::ListContainerStatsResponse { stats }))
    }

    async fn pod_sandbox_stats(
        &self,
        _: Request<cri::PodSandboxStatsRequest>,
    ) -> Reply<cri::PodSandboxStatsResponse> {
        unimplemented("PodSandboxStats")
    }

    async fn list_pod_sandbox_stats(
        &self,
        r: Request<cri::ListPodSandboxStatsRequest>,
    ) -> Reply<cri::ListPodSandboxStatsResponse> {
        self.gate(Rpc::ListPodSandboxStats).await?;
        let stats = lock(&self.inner.store).sandbox_stats(r.get_ref().filter.as_ref());
        Ok(Response::new(cri::ListPodSandboxStatsResponse { stats }))
    }

    async fn update_runtime_config(
        &self,
        _: Request<cri::UpdateRuntimeConfigRequest>,
    ) -> Reply<cri::UpdateRuntimeConfigResponse> {
        Ok(Response::new(cri::UpdateRuntimeConfigResponse {}))
    }

    async fn status(&self, _: Request<cri::StatusRequest>) -> Reply<cri::StatusResponse> {
        self.gate(Rpc::Status).await?;
        let ready = |kind: &str| cri::RuntimeCondition {
            r#type: kind.to_string(),
            status: true,
            reason: String::new(),
            message: String::new(),
        };
        Ok(Response::new(cri::StatusResponse {
            status: Some(cri::RuntimeStatus {
                conditions: vec![ready("RuntimeReady"), ready("NetworkReady")],
            }),
            info: HashMap::new(),
            runtime_handlers: Vec::new(),
            features: None,
        }))
    }

    async fn checkpoint_container(
        &self,
        _: Request<cri::CheckpointContainerRequest>,
    ) -> Reply<cri::CheckpointContainerResponse> {
        unimplemented("CheckpointContainer")
    }

    type GetContainerEventsStream =
        Pin<Box<dyn Stream<Item = Result<cri::ContainerEventResponse, Status>> + Send>>;

    /// Streams every container and sandbox event from now on, until the server shuts down. A
    /// reader that falls more than the buffer behind skips the events it missed.
    async fn get_container_events(
        &self,
        _: Request<cri::GetEventsRequest>,
    ) -> Reply<Self::GetContainerEventsStream> {
        self.gate(Rpc::GetContainerEvents).await?;
        let mut events = self.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let token = self.inner.cancel.clone();
        self.inner.tasks.spawn(async move {
            loop {
                let event = tokio::select! {
                    () = token.cancelled() => return,
                    () = tx.closed() => return,
                    e = events.recv() => e,
                };
                match event {
                    Ok(e) => {
                        if tx.send(Ok(e)).await.is_err() {
                            return;
                        }
                    }
                    Err(RecvError::Closed) => return,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "event reader fell behind")
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn list_metric_descriptors(
        &self,
        _: Request<cri::ListMetricDescriptorsRequest>,
    ) -> Reply<cri::ListMetricDescriptorsResponse> {
        unimplemented("ListMetricDescriptors")
    }

    async fn list_pod_sandbox_metrics(
        &self,
        _: Request<cri::ListPodSandboxMetricsRequest>,
    ) -> Reply<cri::ListPodSandboxMetricsResponse> {
        unimplemented("ListPodSandboxMetrics")
    }

    async fn runtime_config(
        &self,
        _: Request<cri::RuntimeConfigRequest>,
    ) -> Reply<cri::RuntimeConfigResponse> {
        // containerd 1.6 does not implement it either; the kubelet falls back to its own setting.
        unimplemented("RuntimeConfig")
    }
}

#[tonic::async_trait]
impl ImageService for FakeRuntime {
    async fn list_images(
        &self,
        r: Request<cri::ListImagesRequest>,
    ) -> Reply<cri::ListImagesResponse> {
        self.gate(Rpc::ListImages).await?;
        Ok(Response::new(cri::ListImagesResponse {
            images: self.list_images(r.get_ref().filter.as_ref()),
        }))
    }

    async fn image_status(
        &self,
        r: Request<cri::ImageStatusRequest>,
    ) -> Reply<cri::ImageStatusResponse> {
        self.gate(Rpc::ImageStatus).await?;
        Ok(Response::new(cri::ImageStatusResponse {
            image: self.image_status(r.get_ref().image.as_ref()),
            info: HashMap::new(),
        }))
    }

    async fn pull_image(&self, r: Request<cri::PullImageRequest>) -> Reply<cri::PullImageResponse> {
        self.gate(Rpc::PullImage).await?;
        let image_ref = self.pull_image(r.get_ref().image.as_ref(), r.get_ref().auth.as_ref())?;
        Ok(Response::new(cri::PullImageResponse { image_ref }))
    }

    async fn remove_image(
        &self,
        r: Request<cri::RemoveImageRequest>,
    ) -> Reply<cri::RemoveImageResponse> {
        self.gate(Rpc::RemoveImage).await?;
        self.remove_image(r.get_ref().image.as_ref());
        Ok(Response::new(cri::RemoveImageResponse {}))
    }

    async fn image_fs_info(
        &self,
        _: Request<cri::ImageFsInfoRequest>,
    ) -> Reply<cri::ImageFsInfoResponse> {
        self.gate(Rpc::ImageFsInfo).await?;
        let usage = cri::FilesystemUsage {
            timestamp: now_ns(),
            fs_id: Some(cri::FilesystemIdentifier { mountpoint: crate::stats::IMAGE_FS.into() }),
            used_bytes: Some(cri::UInt64Value { value: 0 }),
            inodes_used: Some(cri::UInt64Value { value: 0 }),
        };
        Ok(Response::new(cri::ImageFsInfoResponse {
            image_filesystems: vec![usage.clone()],
            container_filesystems: vec![usage],
        }))
    }
}
