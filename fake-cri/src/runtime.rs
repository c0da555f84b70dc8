//! The CRI operations on the store, with containerd's semantics where the kubelet can tell.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use proto::cri;
use rand::RngCore;
use tokio::sync::Notify;
use tonic::Status;

use crate::images::ImageRef;
use crate::program::OnSigterm;
use crate::store::{Container, Phase, START_ERROR_CODE, Sandbox, SandboxState, Store};
use crate::{FakeRuntime, lock, logs};

/// Exit code of a container killed with SIGKILL.
const SIGKILL_EXIT: i32 = 137;

pub(crate) fn now_ns() -> i64 {
    let d = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn new_id() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sandbox_not_found(id: &str) -> Status {
    Status::not_found(format!("an error occurred when try to find sandbox {id:?}: not found"))
}

fn container_not_found(id: &str) -> Status {
    Status::not_found(format!("an error occurred when try to find container {id:?}: not found"))
}

impl FakeRuntime {
    fn emit(
        &self,
        store: &Store,
        container_id: &str,
        sandbox_id: &str,
        kind: cri::ContainerEventType,
    ) {
        if self.inner.events.receiver_count() == 0 {
            return; // nobody listens: not worth building the statuses
        }
        let event = cri::ContainerEventResponse {
            container_id: container_id.to_string(),
            container_event_type: kind as i32,
            created_at: now_ns(),
            pod_sandbox_status: store.sandboxes.get(sandbox_id).map(Sandbox::to_status),
            containers_statuses: store.container_statuses(sandbox_id),
        };
        // No subscriber is not an error: events are only for whoever listens.
        let _ = self.inner.events.send(event);
    }

    pub(crate) fn subscribe(
        &self,
    ) -> tokio::sync::broadcast::Receiver<cri::ContainerEventResponse> {
        self.inner.events.subscribe()
    }

    pub(crate) fn run_pod_sandbox(
        &self,
        config: Option<cri::PodSandboxConfig>,
    ) -> Result<String, Status> {
        let config =
            config.ok_or_else(|| Status::invalid_argument("sandbox config is required"))?;
        let meta = config
            .metadata
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("sandbox config must include metadata"))?;
        if meta.name.is_empty() || meta.namespace.is_empty() || meta.uid.is_empty() {
            return Err(Status::invalid_argument("sandbox metadata needs name, namespace and uid"));
        }
        let reserved_name =
            format!("{}_{}_{}_{}", meta.name, meta.namespace, meta.uid, meta.attempt);
        let mut store = lock(&self.inner.store);
        if let Some(holder) = store.names.get(&reserved_name) {
            return Err(Status::unknown(format!(
                "failed to reserve sandbox name {reserved_name:?}: name is reserved for {holder:?}"
            )));
        }
        let id = new_id();
        let mut sandbox = Sandbox {
            id: id.clone(),
            config,
            created_at: now_ns(),
            state: SandboxState::Ready,
            ip: None,
            reserved_name,
        };
        if !sandbox.host_network() {
            let ip = store.ipam.allocate().map_err(|e| {
                Status::unknown(format!(
                    "failed to setup network for sandbox {id:?}: plugin type=\"bridge\" failed (add): failed to allocate for range 0: {e}"
                ))
            })?;
            sandbox.ip = Some(ip.to_string());
        }
        store.add_sandbox(sandbox);
        self.emit(&store, &id, &id, cri::ContainerEventType::ContainerCreatedEvent);
        self.emit(&store, &id, &id, cri::ContainerEventType::ContainerStartedEvent);
        Ok(id)
    }

    pub(crate) fn stop_pod_sandbox(&self, id: &str) -> Result<(), Status> {
        let mut store = lock(&self.inner.store);
        let id = store.sandboxes.resolve(id).ok_or_else(|| sandbox_not_found(id))?.to_string();
        for cid in store.container_ids_of(&id) {
            self.finish_locked(&mut store, &cid, SIGKILL_EXIT);
        }
        let was_ready = store.sandboxes.get(&id).is_some_and(|s| s.state == SandboxState::Ready);
        if let Some(s) = store.sandboxes.get_mut(&id) {
            s.state = SandboxState::NotReady;
        }
        store.release_ip(&id);
        if was_ready {
            self.emit(&store, &id, &id, cri::ContainerEventType::ContainerStoppedEvent);
        }
        Ok(())
    }

    pub(crate) fn remove_pod_sandbox(&self, id: &str) -> Result<(), Status> {
        let resolved = lock(&self.inner.store).sandboxes.resolve(id).map(str::to_string);
        let Some(id) = resolved else {
            tracing::debug!(id, "RemovePodSandbox of a sandbox that does not exist");
            return Ok(());
        };
        self.stop_pod_sandbox(&id)?;
        let mut store = lock(&self.inner.store);
        for cid in store.container_ids_of(&id) {
            store.remove_container(&cid);
            self.emit(&store, &cid, &id, cri::ContainerEventType::ContainerDeletedEvent);
        }
        self.emit(&store, &id, &id, cri::ContainerEventType::ContainerDeletedEvent);
        store.remove_sandbox(&id);
        Ok(())
    }

    pub(crate) fn pod_sandbox_status(
        &self,
        id: &str,
    ) -> Result<cri::PodSandboxStatusResponse, Status> {
        let store = lock(&self.inner.store);
        let id = store.sandboxes.resolve(id).ok_or_else(|| sandbox_not_found(id))?;
        let sandbox = &store.sandboxes[id];
        let info = serde_json::json!({ "config": sandbox.config, "pid": 0, "fake": true });
        Ok(cri::PodSandboxStatusResponse {
            status: Some(sandbox.to_status()),
            info: HashMap::from([("info".to_string(), info.to_string())]),
            containers_statuses: store.container_statuses(id),
            timestamp: now_ns(),
        })
    }

    pub(crate) fn list_pod_sandbox(
        &self,
        filter: Option<&cri::PodSandboxFilter>,
    ) -> Vec<cri::PodSandbox> {
        lock(&self.inner.store).list_sandboxes(filter)
    }

    pub(crate) fn create_container(
        &self,
        req: cri::CreateContainerRequest,
    ) -> Result<String, Status> {
        let config =
            req.config.ok_or_else(|| Status::invalid_argument("container config is required"))?;
        let meta = config
            .metadata
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("container config must include metadata"))?;
        if meta.name.is_empty() {
            return Err(Status::invalid_argument("container metadata needs a name"));
        }
        let image_given = config.image.as_ref().map(|i| i.image.clone()).unwrap_or_default();
        let image = lock(&self.inner.images).find(&image_given).cloned().ok_or_else(|| {
            Status::not_found(format!("failed to resolve image {image_given:?}: not found"))
        })?;
        let program = lock(&self.inner.programs).for_container(&meta.name, &image_given);

        let mut store = lock(&self.inner.store);
        let sandbox_id = store
            .sandboxes
            .resolve(&req.pod_sandbox_id)
            .ok_or_else(|| sandbox_not_found(&req.pod_sandbox_id))?
            .to_string();
        let sandbox = &store.sandboxes[&sandbox_id];
        if sandbox.state != SandboxState::Ready {
            return Err(Status::failed_precondition(format!(
                "sandbox {sandbox_id:?} is not ready: cannot create containers in it"
            )));
        }
        let sb = sandbox.config.metadata.clone().unwrap_or_default();
        let reserved_name =
            format!("{}_{}_{}_{}_{}", meta.name, sb.name, sb.namespace, sb.uid, meta.attempt);
        if let Some(holder) = store.names.get(&reserved_name) {
            return Err(Status::unknown(format!(
                "failed to reserve container name {reserved_name:?}: name is reserved for {holder:?}"
            )));
        }
        let log_path = (!sandbox.config.log_directory.is_empty() && !config.log_path.is_empty())
            .then(|| PathBuf::from(&sandbox.config.log_directory).join(&config.log_path));
        let id = new_id();
        let image_ref = image.repo_digests.first().cloned().unwrap_or_else(|| image.id.clone());
        store.add_container(Container {
            id: id.clone(),
            sandbox_id: sandbox_id.clone(),
            config,
            image_id: image.id,
            image_ref,
            created_at: now_ns(),
            phase: Phase::Created,
            log_path,
            reserved_name,
            program,
            usage: Default::default(),
            exited: Arc::new(Notify::new()),
        });
        self.emit(&store, &id, &sandbox_id, cri::ContainerEventType::ContainerCreatedEvent);
        Ok(id)
    }

    pub(crate) fn start_container(&self, id: &str) -> Result<(), Status> {
        let mut store = lock(&self.inner.store);
        let id = store.containers.resolve(id).ok_or_else(|| container_not_found(id))?.to_string();
        let c = &store.containers[&id];
        if c.phase != Phase::Created {
            return Err(Status::failed_precondition(format!(
                "container {id:?} is in {} state",
                c.phase.cri_state().as_str_name()
            )));
        }
        let sandbox_ready =
            store.sandboxes.get(&c.sandbox_id).is_some_and(|s| s.state == SandboxState::Ready);
        if !sandbox_ready {
            return Err(Status::failed_precondition(format!(
                "sandbox container {:?} is not running",
                c.sandbox_id
            )));
        }
        let log = c.log_path.as_ref().map(|p| {
            logs::open(p)
                .and_then(|mut f| logs::write_lines(&mut f, &c.program.output))
                .map_err(|e| (p.clone(), e))
        });
        let (exit, sandbox_id) = (c.program.exit, c.sandbox_id.clone());
        let now = now_ns();
        let Some(c) = store.containers.get_mut(&id) else { return Err(container_not_found(&id)) };
        if let Some(Err((path, e))) = log {
            let message = format!(
                "failed to create containerd task: failed to open log file {}: {e}",
                path.display()
            );
            c.phase = Phase::Exited {
                started_at: 0,
                finished_at: now,
                exit_code: START_ERROR_CODE,
                reason: "StartError".into(),
                message: message.clone(),
            };
            return Err(Status::unknown(message));
        }
        c.phase = Phase::Running { started_at: now };
        self.emit(&store, &id, &sandbox_id, cri::ContainerEventType::ContainerStartedEvent);
        drop(store);
        if let Some((after, code)) = exit {
            let (rt, token) = (self.clone(), self.inner.cancel.clone());
            self.inner.tasks.spawn(async move {
                tokio::select! {
                    () = token.cancelled() => {}
                    () = tokio::time::sleep(after) => { rt.finish(&id, code); }
                }
            });
        }
        Ok(())
    }

    /// Moves a running container to exited with `code`; false if it was not running.
    pub(crate) fn finish(&self, id: &str, code: i32) -> bool {
        let mut store = lock(&self.inner.store);
        match store.containers.resolve(id).map(str::to_string) {
            Some(id) => self.finish_locked(&mut store, &id, code),
            None => false,
        }
    }

    fn finish_locked(&self, store: &mut Store, id: &str, code: i32) -> bool {
        let Some(c) = store.containers.get_mut(id) else { return false };
        let Phase::Running { started_at } = c.phase else { return false };
        c.phase = Phase::exited(started_at, now_ns(), code);
        c.exited.notify_waiters();
        let sandbox_id = c.sandbox_id.clone();
        self.emit(store, id, &sandbox_id, cri::ContainerEventType::ContainerStoppedEvent);
        true
    }

    /// SIGTERM, then SIGKILL after `timeout` if the container is still running (timeout 0: at
    /// once). Stopping a container that is not running does nothing, as in containerd.
    pub(crate) async fn stop_container(&self, id: &str, timeout: Duration) -> Result<(), Status> {
        let (id, on_sigterm, exited) = {
            let store = lock(&self.inner.store);
            let id = store.containers.resolve(id).ok_or_else(|| container_not_found(id))?;
            let c = &store.containers[id];
            if !matches!(c.phase, Phase::Running { .. }) {
                return Ok(());
            }
            (id.to_string(), c.program.on_sigterm, c.exited.clone())
        };
        if timeout > Duration::ZERO {
            match on_sigterm {
                OnSigterm::Exit(code) => {
                    self.finish(&id, code);
                    return Ok(());
                }
                OnSigterm::Ignore => {
                    let woken = exited.notified();
                    tokio::pin!(woken);
                    woken.as_mut().enable();
                    let still_running = lock(&self.inner.store)
                        .containers
                        .get(&id)
                        .is_some_and(|c| matches!(c.phase, Phase::Running { .. }));
                    if still_running {
                        tokio::select! {
                            () = woken => {}
                            () = tokio::time::sleep(timeout) => {}
                        }
                    }
                }
            }
        }
        self.finish(&id, SIGKILL_EXIT);
        Ok(())
    }

    pub(crate) fn remove_container(&self, id: &str) -> Result<(), Status> {
        let mut store = lock(&self.inner.store);
        let Some(id) = store.containers.resolve(id).map(str::to_string) else {
            tracing::debug!(id, "RemoveContainer of a container that does not exist");
            return Ok(());
        };
        self.finish_locked(&mut store, &id, SIGKILL_EXIT);
        if let Some(c) = store.remove_container(&id) {
            self.emit(&store, &id, &c.sandbox_id, cri::ContainerEventType::ContainerDeletedEvent);
        }
        Ok(())
    }

    /// Opens a running container's log file again, creating it after the kubelet renamed it
    /// for rotation, as containerd's `ReopenContainerLog` (which refuses stopped containers).
    pub(crate) fn reopen_container_log(&self, id: &str) -> Result<(), Status> {
        let store = lock(&self.inner.store);
        let id = store.containers.resolve(id).ok_or_else(|| container_not_found(id))?;
        let c = &store.containers[id];
        if !matches!(c.phase, Phase::Running { .. }) {
            return Err(Status::failed_precondition("container is not running"));
        }
        if let Some(path) = &c.log_path {
            logs::open(path).map_err(|e| {
                Status::internal(format!("failed to create and open log file: {e}"))
            })?;
        }
        Ok(())
    }

    pub(crate) fn list_containers(
        &self,
        filter: Option<&cri::ContainerFilter>,
    ) -> Vec<cri::Container> {
        lock(&self.inner.store).list_containers(filter)
    }

    pub(crate) fn container_status(
        &self,
        id: &str,
    ) -> Result<cri::ContainerStatusResponse, Status> {
        let store = lock(&self.inner.store);
        let id = store.containers.resolve(id).ok_or_else(|| container_not_found(id))?;
        let c = &store.containers[id];
        let info = serde_json::json!({
            "sandboxID": c.sandbox_id,
            "pid": 0,
            "config": c.config,
            "fake": true,
        });
        Ok(cri::ContainerStatusResponse {
            status: Some(c.to_status()),
            info: HashMap::from([("info".to_string(), info.to_string())]),
        })
    }

    pub(crate) fn exec_sync(
        &self,
        req: &cri::ExecSyncRequest,
    ) -> Result<cri::ExecSyncResponse, Status> {
        let name = {
            let store = lock(&self.inner.store);
            let id = store
                .containers
                .resolve(&req.container_id)
                .ok_or_else(|| container_not_found(&req.container_id))?;
            let c = &store.containers[id];
            if !matches!(c.phase, Phase::Running { .. }) {
                return Err(Status::unknown(format!(
                    "container {id:?} is in {} state",
                    c.phase.cri_state().as_str_name()
                )));
            }
            c.name().to_string()
        };
        let out = lock(&self.inner.programs).exec(&name, &req.cmd);
        Ok(cri::ExecSyncResponse {
            stdout: out.stdout,
            stderr: out.stderr,
            exit_code: out.exit_code,
        })
    }

    pub(crate) fn pull_image(
        &self,
        spec: Option<&cri::ImageSpec>,
        auth: Option<&cri::AuthConfig>,
    ) -> Result<String, Status> {
        let given = spec.map(|s| s.image.as_str()).unwrap_or_default();
        let r = ImageRef::parse(given).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut images = lock(&self.inner.images);
        let reference = r.tagged().or_else(|| r.digested()).unwrap_or_default();
        if !images.pullable(&r) {
            return Err(Status::unknown(format!(
                "failed to pull and unpack image {given:?}: failed to resolve reference {reference:?}: not found"
            )));
        }
        if !images.authorized(&r, auth) {
            return Err(Status::unknown(format!(
                "failed to pull and unpack image {given:?}: failed to resolve reference {reference:?}: pull access denied, repository does not exist or may require authorization: authorization failed: 401 Unauthorized"
            )));
        }
        Ok(images.insert(&r).id)
    }

    pub(crate) fn image_status(&self, spec: Option<&cri::ImageSpec>) -> Option<cri::Image> {
        let given = spec.map(|s| s.image.as_str()).unwrap_or_default();
        lock(&self.inner.images).find(given).cloned()
    }

    pub(crate) fn list_images(&self, filter: Option<&cri::ImageFilter>) -> Vec<cri::Image> {
        let wanted =
            filter.and_then(|f| f.image.as_ref()).map(|s| s.image.as_str()).unwrap_or_default();
        let images = lock(&self.inner.images);
        if wanted.is_empty() {
            return images.list();
        }
        images.find(wanted).cloned().into_iter().collect()
    }

    pub(crate) fn remove_image(&self, spec: Option<&cri::ImageSpec>) {
        let given = spec.map(|s| s.image.as_str()).unwrap_or_default();
        lock(&self.inner.images).remove(given);
    }
}
