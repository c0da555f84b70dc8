//! [`CriClient`]: a CRI v1 client on a unix socket with a connect timeout and per-call deadlines.

use std::future::Future;
use std::os::unix::fs::FileTypeExt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::brief;
use crate::cri::image_service_client::ImageServiceClient;
use crate::cri::runtime_service_client::RuntimeServiceClient;
use crate::cri::{self};
use crate::endpoint::UnixEndpoint;
use crate::error::{CallError, CallErrorKind, ConnectError};

/// The CRI API version this client speaks.
pub const CRI_API_VERSION: &str = "v1";

/// The CRI v1 runtime service's gRPC name (a macro, so request paths are built from it).
macro_rules! runtime_service {
    () => {
        "runtime.v1.RuntimeService"
    };
}
const RUNTIME_SERVICE: &str = runtime_service!();

/// A RuntimeService method's name and its request path.
macro_rules! rpc {
    ($method:literal) => {
        ($method, concat!("/", runtime_service!(), "/", $method))
    };
}

/// How much later than our own deadline the runtime is told to give up (`grpc-timeout`). tonic
/// enforces that header on the client side too, as an untyped "cancelled"; the slack makes our
/// own timer fire first, so a deadline is always reported as [`CallErrorKind::DeadlineExceeded`].
const SERVER_DEADLINE_SLACK: Duration = Duration::from_millis(100);

/// Timeouts for a [`CriClient`].
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Reaching the socket and getting the runtime's `Version` answer.
    pub connect_timeout: Duration,
    /// Each unary call (upstream's `--runtime-request-timeout`, 2 min by default).
    pub call_timeout: Duration,
    /// `PullImage`, which transfers whole images.
    pub pull_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(120),
            pull_timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// Told of every call a [`CriClient`] makes once it ends: the one place that sees them all
/// (the kubelet's runtime operation metrics).
pub trait CallObserver: Send + Sync + std::fmt::Debug {
    /// `rpc` (as [`CallError::rpc`] names it) took `elapsed` and failed or not.
    fn observe(&self, rpc: &'static str, elapsed: Duration, failed: bool);
}

/// A connected CRI v1 runtime (RuntimeService and ImageService on one socket).
///
/// Cloning is cheap: clones share the HTTP/2 connection (and the observer).
#[derive(Debug, Clone)]
pub struct CriClient {
    endpoint: String,
    runtime: RuntimeServiceClient<Channel>,
    channel: Channel,
    images: ImageServiceClient<Channel>,
    options: ClientOptions,
    version: cri::VersionResponse,
    observer: Option<Arc<dyn CallObserver>>,
}

impl CriClient {
    /// Connects to `endpoint` and checks that it is a CRI v1 runtime.
    ///
    /// Fails within `options.connect_timeout` (plus the file check) with an error naming the
    /// endpoint when the socket is missing, refuses connections, hangs, or is not CRI v1.
    pub async fn connect(
        endpoint: &UnixEndpoint,
        options: ClientOptions,
    ) -> Result<Self, ConnectError> {
        let name = endpoint.to_string();
        let path = endpoint.path().to_path_buf();
        match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ConnectError::SocketMissing { endpoint: name, path });
            }
            Err(source) => return Err(ConnectError::Io { endpoint: name, source }),
            Ok(m) if !m.file_type().is_socket() => {
                return Err(ConnectError::NotASocket { endpoint: name, path });
            }
            Ok(_) => {}
        }

        // Connect once ourselves so refusals are told apart by io::ErrorKind, then hand that
        // stream to the channel as its first connection; later reconnects dial the path again.
        let first = tokio::time::timeout(options.connect_timeout, UnixStream::connect(&path))
            .await
            .map_err(|_| ConnectError::Timeout {
                endpoint: name.clone(),
                stage: "connect",
                timeout: options.connect_timeout,
            })?
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    ConnectError::Refused { endpoint: name.clone(), source }
                }
                _ => ConnectError::Io { endpoint: name.clone(), source },
            })?;
        let first = Arc::new(Mutex::new(Some(first)));
        // No transport-level timeout: every call below carries its own deadline, which also
        // bounds reconnects, and reports it as ours rather than as a transport message.
        let channel = Endpoint::from_static("http://localhost").connect_with_connector_lazy(
            tower::service_fn(move |_: Uri| {
                let first = first.lock().unwrap_or_else(PoisonError::into_inner).take();
                let path = path.clone();
                async move {
                    let stream = match first {
                        Some(stream) => stream,
                        None => UnixStream::connect(&path).await?,
                    };
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }),
        );

        let mut runtime = RuntimeServiceClient::new(channel.clone());
        let mut request =
            tonic::Request::new(cri::VersionRequest { version: CRI_API_VERSION.to_string() });
        request.set_timeout(options.connect_timeout + SERVER_DEADLINE_SLACK);
        let version =
            match tokio::time::timeout(options.connect_timeout, runtime.version(request)).await {
                Err(_) => {
                    return Err(ConnectError::Timeout {
                        endpoint: name,
                        stage: "Version",
                        timeout: options.connect_timeout,
                    });
                }
                Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => {
                    return Err(ConnectError::NotCri {
                        endpoint: name,
                        reason: "it does not implement runtime.v1.RuntimeService/Version".into(),
                    });
                }
                Ok(Err(status)) => {
                    return Err(ConnectError::NotCri {
                        endpoint: name,
                        reason: format!("Version failed: {}: {}", status.code(), status.message()),
                    });
                }
                Ok(Ok(response)) => response.into_inner(),
            };
        if version.runtime_api_version != CRI_API_VERSION {
            return Err(ConnectError::WrongVersion {
                endpoint: name,
                runtime: format!("{} {}", version.runtime_name, version.runtime_version),
                version: version.runtime_api_version,
            });
        }
        Ok(Self {
            endpoint: name,
            runtime,
            images: ImageServiceClient::new(channel.clone()),
            channel,
            options,
            version,
            observer: None,
        })
    }

    /// This client, telling `observer` of every call from now on (clones made after too).
    #[must_use]
    pub fn observed_by(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The endpoint as given, with its scheme.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The runtime's answer to `Version` at connect time.
    pub fn version(&self) -> &cri::VersionResponse {
        &self.version
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    async fn unary<Req, Resp, Fut>(
        &self,
        rpc: &'static str,
        deadline: Duration,
        req: Req,
        call: impl FnOnce(tonic::Request<Req>) -> Fut,
    ) -> Result<Resp, CallError>
    where
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let mut request = tonic::Request::new(req);
        request.set_timeout(deadline + SERVER_DEADLINE_SLACK);
        let started = std::time::Instant::now();
        let result = match tokio::time::timeout(deadline, call(request)).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(CallErrorKind::Status(status)),
            Err(_) => Err(CallErrorKind::DeadlineExceeded(deadline)),
        };
        if let Some(observer) = &self.observer {
            observer.observe(rpc, started.elapsed(), result.is_err());
        }
        result.map_err(|kind| CallError { rpc, endpoint: self.endpoint.clone(), kind })
    }

    /// `ListPodSandbox`, its answer decoded briefly ([`brief`]).
    pub async fn list_pod_sandbox_brief(
        &self,
        req: cri::ListPodSandboxRequest,
    ) -> Result<Vec<brief::Sandbox>, CallError> {
        let list: brief::SandboxList = self.runtime_unary_as(rpc!("ListPodSandbox"), req).await?;
        Ok(list.items)
    }

    /// `ListContainers`, its answer decoded briefly ([`brief`]).
    pub async fn list_containers_brief(
        &self,
        req: cri::ListContainersRequest,
    ) -> Result<Vec<brief::Container>, CallError> {
        let list: brief::ContainerList = self.runtime_unary_as(rpc!("ListContainers"), req).await?;
        Ok(list.containers)
    }

    /// A RuntimeService call (named by `rpc!`) under the call deadline, its answer decoded
    /// as `Resp`: a message the wire answer is (a [`brief`] one).
    async fn runtime_unary_as<Req, Resp>(
        &self,
        (rpc, path): (&'static str, &'static str),
        req: Req,
    ) -> Result<Resp, CallError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let path = PathAndQuery::from_static(path);
        let call = move |mut r: tonic::Request<Req>| async move {
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unknown(format!("Service was not ready: {e}")))?;
            r.extensions_mut().insert(tonic::GrpcMethod::new(RUNTIME_SERVICE, rpc));
            grpc.unary(r, path, ListCodec::<Req, Resp>::default()).await
        };
        self.unary(rpc, self.options.call_timeout, req, call).await
    }

    /// `StopContainer`: the runtime may take the grace period before it kills, so the deadline
    /// is the grace period plus the call timeout.
    pub async fn stop_container(
        &self,
        container_id: &str,
        grace: Duration,
    ) -> Result<cri::StopContainerResponse, CallError> {
        let mut c = self.runtime.clone();
        let req = cri::StopContainerRequest {
            container_id: container_id.to_string(),
            timeout: i64::try_from(grace.as_secs()).unwrap_or(i64::MAX),
        };
        let deadline = self.options.call_timeout + grace;
        self.unary(
            "StopContainer",
            deadline,
            req,
            move |r| async move { c.stop_container(r).await },
        )
        .await
    }

    /// `ExecSync`: the deadline is the command's own timeout plus the call timeout.
    pub async fn exec_sync(
        &self,
        req: cri::ExecSyncRequest,
    ) -> Result<cri::ExecSyncResponse, CallError> {
        let mut c = self.runtime.clone();
        let own = Duration::from_secs(u64::try_from(req.timeout).unwrap_or(0));
        let deadline = self.options.call_timeout + own;
        self.unary("ExecSync", deadline, req, move |r| async move { c.exec_sync(r).await }).await
    }

    /// `PullImage`, under the pull timeout rather than the call timeout.
    pub async fn pull_image(
        &self,
        req: cri::PullImageRequest,
    ) -> Result<cri::PullImageResponse, CallError> {
        let mut c = self.images.clone();
        let deadline = self.options.pull_timeout;
        self.unary("PullImage", deadline, req, move |r| async move { c.pull_image(r).await }).await
    }

    /// `GetContainerEvents`: the stream has no deadline; opening it has the call deadline.
    pub async fn get_container_events(
        &self,
    ) -> Result<tonic::Streaming<cri::ContainerEventResponse>, CallError> {
        let mut c = self.runtime.clone();
        self.unary(
            "GetContainerEvents",
            self.options.call_timeout,
            cri::GetEventsRequest {},
            move |r| async move { c.get_container_events(r).await },
        )
        .await
    }
}

/// The unary calls that take the plain call deadline.
macro_rules! unary_rpcs {
    ($($svc:ident.$method:ident($Req:ident) -> $Resp:ident as $rpc:literal;)*) => {
        impl CriClient {
            $(
                #[doc = concat!("CRI `", $rpc, "`, under the call deadline.")]
                pub async fn $method(&self, req: cri::$Req) -> Result<cri::$Resp, CallError> {
                    let mut c = self.$svc.clone();
                    let deadline = self.options.call_timeout;
                    self.unary($rpc, deadline, req, move |r| async move { c.$method(r).await })
                        .await
                }
            )*
        }
    };
}

unary_rpcs! {
    runtime.status(StatusRequest) -> StatusResponse as "Status";
    runtime.run_pod_sandbox(RunPodSandboxRequest) -> RunPodSandboxResponse as "RunPodSandbox";
    runtime.stop_pod_sandbox(StopPodSandboxRequest) -> StopPodSandboxResponse as "StopPodSandbox";
    runtime.remove_pod_sandbox(RemovePodSandboxRequest) -> RemovePodSandboxResponse
        as "RemovePodSandbox";
    runtime.pod_sandbox_status(PodSandboxStatusRequest) -> PodSandboxStatusResponse
        as "PodSandboxStatus";
    runtime.list_pod_sandbox(ListPodSandboxRequest) -> ListPodSandboxResponse as "ListPodSandbox";
    runtime.create_container(CreateContainerRequest) -> CreateContainerResponse
        as "CreateContainer";
    runtime.start_container(StartContainerRequest) -> StartContainerResponse as "StartContainer";
    runtime.remove_container(RemoveContainerRequest) -> RemoveContainerResponse
        as "RemoveContainer";
    runtime.list_containers(ListContainersRequest) -> ListContainersResponse as "ListContainers";
    runtime.container_status(ContainerStatusRequest) -> ContainerStatusResponse
        as "ContainerStatus";
    runtime.exec(ExecRequest) -> ExecResponse as "Exec";
    runtime.attach(AttachRequest) -> AttachResponse as "Attach";
    runtime.port_forward(PortForwardRequest) -> PortForwardResponse as "PortForward";
    runtime.reopen_container_log(ReopenContainerLogRequest) -> ReopenContainerLogResponse
        as "ReopenContainerLog";
    runtime.update_container_resources(UpdateContainerResourcesRequest)
        -> UpdateContainerResourcesResponse as "UpdateContainerResources";
    runtime.list_container_stats(ListContainerStatsRequest) -> ListContainerStatsResponse
        as "ListContainerStats";
    runtime.list_pod_sandbox_stats(ListPodSandboxStatsRequest) -> ListPodSandboxStatsResponse
        as "ListPodSandboxStats";
    runtime.runtime_config(RuntimeConfigRequest) -> RuntimeConfigResponse as "RuntimeConfig";
    images.list_images(ListImagesRequest) -> ListImagesResponse as "ListImages";
    images.image_status(ImageStatusRequest) -> ImageStatusResponse as "ImageStatus";
    images.remove_image(RemoveImageRequest) -> RemoveImageResponse as "RemoveImage";
    images.image_fs_info(ImageFsInfoRequest) -> ImageFsInfoResponse as "ImageFsInfo";
}

/// The prost codec for the brief lists, with a request buffer the size of a list request:
/// tonic's default allocates 8 KiB per call to encode it, a large allocation that made the
/// allocator consolidate its free lists on every relist (3 % of the idle kubelet's CPU).
struct ListCodec<Req, Resp>(std::marker::PhantomData<(Req, Resp)>);

impl<Req, Resp> Default for ListCodec<Req, Resp> {
    fn default() -> Self {
        Self(std::marker::PhantomData)
    }
}

/// A list request's buffer: a filter's ids and label selector fit; a larger one grows it.
const LIST_REQUEST_BUFFER: usize = 512;

impl<Req, Resp> tonic::codec::Codec for ListCodec<Req, Resp>
where
    Req: prost::Message + Send + 'static,
    Resp: prost::Message + Default + Send + 'static,
{
    type Encode = Req;
    type Decode = Resp;
    type Encoder = tonic_prost::ProstEncoder<Req>;
    type Decoder = tonic_prost::ProstDecoder<Resp>;

    fn encoder(&mut self) -> Self::Encoder {
        // tonic's default yield threshold (32 KiB), which a unary call never reaches.
        let settings = tonic::codec::BufferSettings::new(LIST_REQUEST_BUFFER, 32 * 1024);
        tonic_prost::ProstEncoder::new(settings)
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::default()
    }
}
