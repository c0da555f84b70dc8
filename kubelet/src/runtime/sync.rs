//! `sync_pod`: executes the plan of `compute_pod_actions` in upstream's order: kill what must
//! go, create the sandbox, start the next init container or else the app containers.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use proto::{CallError, cri};

use super::actions::{KillAction, compute_pod_actions, is_sidecar};
use super::backoff;
use super::container::{ContainerContext, container_config};
use super::env::{self, EnvContext};
use super::images::ImageError;
use super::sandbox::{pod_log_dir, sandbox_config};
use super::security_context;
use super::status::{ContainerState, PodRuntimeStatus};
use super::{MIN_GRACE, RuntimeError, RuntimeManager, volumes};
use crate::events::ObjectRef;
use crate::fieldpath::PodAddresses;
use crate::metrics::ContainerType;
use crate::prober::ProbeResults;
use crate::volume::PodVolumes;

/// Why a container is not running, as its status shows (`state.waiting`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub reason: String,
    pub message: String,
}

impl Waiting {
    fn new(reason: &str, message: impl Into<String>) -> Self {
        Self { reason: reason.to_string(), message: message.into() }
    }
}

/// What one sync did and found.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    /// The runtime state after the sync.
    pub status: PodRuntimeStatus,
    /// Containers that could not be started this time, and why.
    pub waiting: BTreeMap<String, Waiting>,
    /// Sync again after this long (a backoff expires, or a step failed).
    pub requeue_after: Option<Duration>,
    /// A pod-level failure (the sandbox could not be created), for events.
    pub error: Option<String>,
}

impl SyncOutcome {
    fn requeue(&mut self, after: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(after, |d| d.min(after)));
    }
}

/// How long a pod whose sync failed waits before the next try.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(2);

fn pod_grace(pod: &Pod) -> Duration {
    let secs = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(api::defaults::DEFAULT_TERMINATION_GRACE_PERIOD);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn ns_time(ns: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
}

/// The pod's termination grace period (its deletion grace period when being deleted).
pub fn grace_period(pod: &Pod) -> Duration {
    pod_grace(pod)
}

struct StartContext<'a> {
    pod: &'a Pod,
    status: &'a PodRuntimeStatus,
    sandbox_id: &'a str,
    sandbox_config: &'a cri::PodSandboxConfig,
    pod_ip: Option<&'a str>,
    volumes: &'a PodVolumes,
}

impl RuntimeManager {
    /// One sync of `pod`: reads the runtime's state, plans (with the probes' verdicts), and
    /// acts. When the plan starts anything (which may take long: image pulls, postStart
    /// hooks), `observe` first sees the state it starts from, so the pod's status shows
    /// `ContainerCreating`/`PodInitializing` meanwhile, as upstream's status set before
    /// `SyncPod`.
    pub async fn sync_pod(
        &self,
        pod: &Pod,
        probes: &ProbeResults,
        observe: &mut (dyn FnMut(&PodRuntimeStatus) + Send),
    ) -> Result<SyncOutcome, RuntimeError> {
        let uid = uid(pod);
        let status = self.pod_status_for_sync(uid).await?;
        let actions = compute_pod_actions(pod, &status, probes);
        // What this sync changes, the PLEG may relist before it happens and see nothing of:
        // the next sync reads afresh.
        if !actions.changes_nothing() || super::has_dead_containers_to_prune(&status) {
            self.forget_status(uid);
        }
        if actions.create_sandbox
            || !actions.init_containers_to_start.is_empty()
            || !actions.containers_to_start.is_empty()
        {
            observe(&status);
        }
        let mut out = SyncOutcome::default();
        let acted =
            actions.kill_pod || actions.create_sandbox || !actions.containers_to_kill.is_empty();
        if actions.create_sandbox && actions.sandbox_id.is_some() {
            let message = "Pod sandbox changed, it will be killed and re-created.";
            self.recorder.normal(&ObjectRef::pod(pod), "SandboxChanged", message);
        }
        if actions.kill_pod {
            let opts =
                super::KillOptions { pod: Some(pod), grace: Some(pod_grace(pod)), hooks: true };
            self.kill_pod(uid, &opts).await?;
            if !actions.create_sandbox {
                out.status = self.pod_status(uid).await?;
                return Ok(out);
            }
        } else if !actions.containers_to_kill.is_empty() {
            self.kill_containers(pod, &status, &actions.containers_to_kill).await?;
        }
        self.prune_dead_containers(&status).await;

        let log_dir = pod_log_dir(&self.config.pod_logs_dir, pod);
        // The pod's cgroup, made and sized before its sandbox (upstream's `EnsureExists`, on
        // every sync so the QoS cgroups count the pods a restarted kubelet finds running).
        let no_spec = PodSpec::default();
        let cgroup = match self.cm.ensure_pod(uid, pod.spec.as_ref().unwrap_or(&no_spec)) {
            Ok(cgroup) => cgroup,
            Err(e) if actions.create_sandbox => {
                out.error = Some(format!("making the pod cgroup: {e}"));
                out.requeue(ERROR_REQUEUE);
                out.status = status;
                return Ok(out);
            }
            Err(e) => {
                tracing::warn!(uid, error = %e, "making the pod cgroup");
                String::new()
            }
        };
        let security = match security_context::sandbox(pod, &self.seccomp_root()) {
            Ok(security) => security,
            Err(e) => {
                out.error = Some(e.to_string());
                out.requeue(ERROR_REQUEUE);
                out.status = status;
                return Ok(out);
            }
        };
        let sandbox = sandbox_config(
            pod,
            actions.attempt,
            &log_dir,
            &cgroup,
            &self.config.resolv_conf,
            security,
        );
        // Held through the first container starts, so each admitted pod comes up whole.
        let creating_permit =
            if actions.create_sandbox { self.creations.acquire().await.ok() } else { None };
        let (sandbox_id, pod_ip) = if actions.create_sandbox {
            if let Err(e) = std::fs::create_dir_all(&log_dir) {
                out.error =
                    Some(format!("creating the pod log directory {}: {e}", log_dir.display()));
                out.requeue(ERROR_REQUEUE);
                out.status = status;
                return Ok(out);
            }
            let run = cri::RunPodSandboxRequest {
                config: Some(sandbox.clone()),
                runtime_handler: String::new(),
            };
            self.metrics.started_pods.inc();
            match self.cri.run_pod_sandbox(run).await {
                Ok(r) => {
                    let s = self
                        .cri
                        .pod_sandbox_status(cri::PodSandboxStatusRequest {
                            pod_sandbox_id: r.pod_sandbox_id.clone(),
                            verbose: false,
                        })
                        .await
                        .map_err(|source| RuntimeError::Cri { uid: uid.to_string(), source })?;
                    let ip =
                        s.status.and_then(|s| s.network).map(|n| n.ip).filter(|ip| !ip.is_empty());
                    (r.pod_sandbox_id, ip)
                }
                Err(e) => {
                    self.metrics.started_pods_errors.inc();
                    out.error = Some(format!("Failed to create pod sandbox: {e}"));
                    out.requeue(ERROR_REQUEUE);
                    out.status = self.pod_status(uid).await?;
                    return Ok(out);
                }
            }
        } else {
            (actions.sandbox_id.clone().unwrap_or_default(), status.ip().map(str::to_string))
        };

        let starts =
            !actions.init_containers_to_start.is_empty() || !actions.containers_to_start.is_empty();
        let mounted = self.volumes.mount_pod(pod).await;
        for e in &mounted.errors {
            tracing::warn!(error = %e, "setting up a volume");
            let message =
                format!("MountVolume.SetUp failed for volume {:?} : {}", e.volume, e.reason);
            self.recorder.warning(&ObjectRef::pod(pod), "FailedMount", message);
        }
        if !mounted.errors.is_empty() {
            // As upstream, nothing starts before every volume is set up (the containers wait
            // in ContainerCreating); running containers carry on.
            if starts {
                out.requeue(ERROR_REQUEUE);
            }
            out.status = if acted { self.pod_status(uid).await? } else { status };
            return Ok(out);
        }
        let volumes = mounted.volumes;
        let ctx = StartContext {
            pod,
            status: &status,
            sandbox_id: &sandbox_id,
            sandbox_config: &sandbox,
            pod_ip: pod_ip.as_deref(),
            volumes: &volumes,
        };
        let spec = pod.spec.as_ref();
        let mut started = false;
        let mut creating = creating_permit;
        let mut initializing = false;
        for &i in &actions.init_containers_to_start {
            let Some(c) = spec.and_then(|s| s.init_containers.as_ref()).and_then(|ic| ic.get(i))
            else {
                continue;
            };
            let ok = self.start_one(&ctx, c, &mut out).await;
            started |= ok;
            if !ok && !is_sidecar(c) {
                initializing = true; // a regular init container failed to start: wait
                break;
            }
        }
        if !initializing {
            for &i in &actions.containers_to_start {
                if let Some(c) = spec.and_then(|s| s.containers.get(i)) {
                    started |= self.start_one(&ctx, c, &mut out).await;
                }
            }
        }
        drop(creating.take()); // the next pod may start while this one's status is read
        out.status = if acted || started { self.pod_status(uid).await? } else { status };
        Ok(out)
    }

    /// Stops containers the plan replaces (a changed spec, a failed probe), each with its
    /// preStop hook and its grace period (a probe's own, or the pod's), at least 2 s.
    async fn kill_containers(
        &self,
        pod: &Pod,
        status: &PodRuntimeStatus,
        kills: &[KillAction],
    ) -> Result<(), RuntimeError> {
        let spec = pod.spec.as_ref();
        let find = |name: &str| {
            spec.into_iter()
                .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
                .find(|c| c.name == name)
        };
        let stops = kills.iter().filter_map(|k| {
            let info = status.containers.iter().find(|c| c.id == k.container_id)?;
            tracing::info!(pod = ?pod.metadata.name, container = %k.name, "{}", k.message);
            self.recorder.normal(&ObjectRef::container(pod, &k.name), "Killing", &k.message);
            let grace = k.grace.unwrap_or_else(|| pod_grace(pod));
            Some(self.stop_container(Some(pod), find(&k.name), info, grace, true, MIN_GRACE))
        });
        futures::future::join_all(stops).await.into_iter().collect::<Result<Vec<()>, _>>()?;
        Ok(())
    }

    /// Starts `c`, recording why not in `out.waiting` when it cannot. True if it started.
    async fn start_one(
        &self,
        ctx: &StartContext<'_>,
        c: &Container,
        out: &mut SyncOutcome,
    ) -> bool {
        match self.start_container(ctx, c).await {
            Ok(()) => true,
            Err((waiting, retry)) => {
                self.record_waiting(ctx.pod, c, &waiting);
                out.waiting.insert(c.name.clone(), waiting);
                out.requeue(retry.unwrap_or(ERROR_REQUEUE));
                false
            }
        }
    }

    /// The event upstream records when a container cannot start: `BackOff` while its restart
    /// backs off, `Failed` with `Error: <reason>` for an image that is not there, `Failed` with
    /// `Error: <message>` when its config, creation or start failed.
    fn record_waiting(&self, pod: &Pod, c: &Container, waiting: &Waiting) {
        let object = ObjectRef::container(pod, &c.name);
        let message = match waiting.reason.as_str() {
            "CrashLoopBackOff" => {
                let pod_ref = format!(
                    "{}_{}({})",
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    uid(pod)
                );
                let message =
                    format!("Back-off restarting failed container {} in pod {pod_ref}", c.name);
                self.recorder.warning(&object, "BackOff", message);
                return;
            }
            "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull" | "ImageInspectError" => {
                format!("Error: {}", waiting.reason)
            }
            _ => format!("Error: {}", waiting.message),
        };
        self.recorder.warning(&object, "Failed", message);
    }

    fn seccomp_root(&self) -> std::path::PathBuf {
        security_context::seccomp_root(&self.config.root_dir)
    }

    /// `runAsNonRoot` against the image's user, asked of the runtime only when the context
    /// does not name a uid (upstream's `getImageUser` + `verifyRunAsNonRoot`).
    async fn verify_run_as_non_root(
        &self,
        pod: &Pod,
        c: &Container,
        image_ref: &str,
    ) -> Result<(), String> {
        let sc = security_context::effective(pod, c);
        if sc.run_as_non_root != Some(true) {
            return Ok(());
        }
        let (uid, user) = if sc.run_as_user.is_some() {
            (None, String::new())
        } else {
            let spec = Some(cri::ImageSpec { image: image_ref.to_string(), ..Default::default() });
            let status = self
                .cri
                .image_status(cri::ImageStatusRequest { image: spec, verbose: false })
                .await
                .map_err(|e| format!("failed to get image user of {image_ref}: {e}"))?;
            let image = status.image.unwrap_or_default();
            // Neither a uid nor a user name: the image runs as root.
            match (image.uid, image.username) {
                (Some(uid), _) => (Some(uid.value), String::new()),
                (None, name) if !name.is_empty() => (None, name),
                (None, _) => (Some(0), String::new()),
            }
        };
        security_context::verify_run_as_non_root(pod, c, uid, &user).map_err(|e| e.to_string())
    }

    /// Upstream's `startContainer`: backoff, image, config, create, start, postStart hook.
    async fn start_container(
        &self,
        ctx: &StartContext<'_>,
        c: &Container,
    ) -> Result<(), (Waiting, Option<Duration>)> {
        let pod = ctx.pod;
        let uid = uid(pod);
        let previous = ctx.status.container(&c.name);
        let restart_count = previous.map_or(0, |p| p.restart_count + 1);
        let pod_ref = format!(
            "{}_{}({uid})",
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod.metadata.namespace.as_deref().unwrap_or_default()
        );
        let key = format!("{pod_ref}_{}_{}", c.name, super::container::container_hash(c));
        let exited_at =
            previous.filter(|p| p.state == ContainerState::Exited).map(|p| ns_time(p.finished_at));
        // Upstream's `doBackOff`: wait out the delay, else count this restart.
        let mut restart_backoff = None;
        if let (Some(at), Some(previous)) = (exited_at, previous) {
            let bounds = backoff::Bounds::restarts(
                self.config.restart_backoff_max,
                api::restart_backoff::of(pod.metadata.annotations.as_ref()).unwrap_or_default(),
            );
            let mut restarts =
                self.restarts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // A delay from before a kubelet restart, unless the container ran long enough
            // for it to start over.
            let started = ns_time(previous.started_at);
            if let Some(d) = previous.restart_backoff
                && at.duration_since(started).is_ok_and(|ran| ran < backoff::RESTART_RESET)
            {
                restarts.seed(&key, d, started);
            }
            if let Some(left) = restarts.remaining(&key, at, SystemTime::now()) {
                let delay = restarts.delay(&key).unwrap_or_default();
                let msg = format!(
                    "back-off {} restarting failed container={} pod={pod_ref}",
                    humantime::format_duration(delay),
                    c.name
                );
                return Err((Waiting::new("CrashLoopBackOff", msg), Some(left)));
            }
            restarts.next_within(&key, at, bounds);
            restart_backoff = restarts.delay(&key);
        }
        let image = c.image.as_deref().unwrap_or_default();
        let policy = c.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
        let object = ObjectRef::container(pod, &c.name);
        let pulled = self.images.ensure(&self.cri, &self.recorder, &object, pod, image, policy);
        let image_ref = pulled.await.map_err(|e| {
            // A pull that just failed is looked at again soon, so the status moves on to
            // ImagePullBackOff while the backoff runs (as upstream's worker requeue makes it);
            // during the backoff, the next look is when it ends.
            let retry = match e {
                ImageError::BackOff { .. } => self.images.retry_after(uid, image),
                _ => Some(ERROR_REQUEUE),
            };
            (Waiting::new(e.reason(), e.to_string()), retry)
        })?;
        let config_error = |e: String| (Waiting::new("CreateContainerConfigError", e), None);
        let security = security_context::container(
            pod,
            c,
            &self.seccomp_root(),
            security_context::apparmor_enabled(),
        )
        .map_err(|e| config_error(e.to_string()))?;
        self.verify_run_as_non_root(pod, c, &image_ref).await.map_err(config_error)?;
        let env = EnvContext {
            pod,
            container: c,
            addresses: PodAddresses { pod_ip: ctx.pod_ip, host_ip: self.config.host_ip.as_deref() },
            allocatable: self.volumes.allocatable,
            objects: &self.volumes.objects,
            recorder: &self.recorder,
        };
        let envs = env::environment(&env).await.map_err(|e| config_error(e.to_string()))?;
        let vars: std::collections::HashMap<String, String> =
            envs.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
        let mut mounts = volumes::container_mounts(c, ctx.volumes, &vars)
            .map_err(|e| config_error(e.to_string()))?;
        let message_mount = volumes::termination_message_mount(&self.config.root_dir, uid, c)
            .map_err(|e| config_error(format!("creating the termination message file: {e}")))?;
        mounts.extend(message_mount);
        let config = container_config(ContainerContext {
            pod,
            container: c,
            restart_count,
            image_ref: &image_ref,
            envs,
            mounts,
            memory_capacity: self.config.memory_capacity,
            cfs: self.cm.config().pod,
            security_context: security,
            restart_backoff,
        });
        let create = cri::CreateContainerRequest {
            pod_sandbox_id: ctx.sandbox_id.to_string(),
            config: Some(config),
            sandbox_config: Some(ctx.sandbox_config.clone()),
        };
        let kind = container_type(pod, c).label();
        self.metrics.started_containers.with(&[kind]).inc();
        let failed = |e: &CallError| {
            self.metrics.started_containers_errors.with(&[kind, grpc_code_name(e.code())]).inc();
        };
        let id = self
            .cri
            .create_container(create)
            .await
            .map_err(|e| {
                failed(&e);
                (Waiting::new("CreateContainerError", e.message().to_string()), None)
            })?
            .container_id;
        self.recorder.normal(&object, "Created", "Container created");
        self.cri
            .start_container(cri::StartContainerRequest { container_id: id.clone() })
            .await
            .map_err(|e| {
                failed(&e);
                (Waiting::new("RunContainerError", e.message().to_string()), None)
            })?;
        self.recorder.normal(&object, "Started", "Container started");
        if let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref())
            && let Err(message) = self.run_hook(pod, c, &id, hook, ctx.pod_ip, None).await
        {
            tracing::warn!(pod = %pod_ref, container = %c.name, "{message}");
            // The message may hold the command's output: it stays out of events.
            self.recorder.warning(&object, "FailedPostStartHook", "PostStartHook failed");
            self.recorder.normal(&object, "Killing", "FailedPostStartHook");
            if let Err(e) = self.cri.stop_container(&id, pod_grace(pod).max(MIN_GRACE)).await {
                tracing::warn!(pod = %pod_ref, container = %c.name, error = %e, "killing the container after its postStart hook failed");
            }
            return Err((Waiting::new("PostStartHookError", message), None));
        }
        Ok(())
    }
}

/// Whether `c` is one of `pod`'s init containers (sidecars included) or an app container.
fn container_type(pod: &Pod, c: &Container) -> ContainerType {
    let init = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref());
    if init.is_some_and(|cs| cs.iter().any(|i| i.name == c.name)) {
        ContainerType::InitContainer
    } else {
        ContainerType::Container
    }
}

/// A gRPC code as Go's `codes.Code.String()` spells it (`kubelet_started_containers_errors_total`'s
/// `code`).
pub fn grpc_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}
