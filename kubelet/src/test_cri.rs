//! What the kubelet's tests against the fake runtime share: pods and containers made over CRI
//! as the kubelet makes them (a sandbox per pod in `default`, its logs under a directory, each
//! container's log at `<name>/0.log`), the node's files under a temp root ([`put`]), and a
//! container manager with nothing reserved ([`container_manager`]).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use proto::{CriClient, cri};

/// A pod spec of one container `c` with these requests and limits (`("cpu", "500m")`; none
/// given, none set).
pub fn resources_spec(
    requests: &[(&str, &str)],
    limits: &[(&str, &str)],
) -> k8s_openapi::api::core::v1::PodSpec {
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let list = |pairs: &[(&str, &str)]| {
        (!pairs.is_empty()).then(|| {
            pairs.iter().map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string()))).collect()
        })
    };
    PodSpec {
        containers: vec![Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A container manager over the cgroupfs at `root` with `config`, nothing reserved.
pub fn container_manager(
    root: &Path,
    config: crate::cm::node_config::NodeConfig,
) -> crate::cm::ContainerManager {
    use crate::cm::allocatable::{Capacity, NodeAllocatable, Reserved};
    let node = crate::cm::manager::NodeResources {
        capacity: Capacity(std::collections::BTreeMap::new()),
        allocatable: NodeAllocatable {
            system: Reserved::default(),
            kube: Reserved::default(),
            hard: crate::eviction::Thresholds::none(),
        },
    };
    let fs = std::sync::Arc::new(crate::cm::CgroupFs::new(root.to_path_buf()));
    crate::cm::ContainerManager::new(
        fs,
        config,
        node,
        crate::events::Recorder::default(),
        "n1".into(),
    )
}

/// Writes `text` at `path` under `root`, making the directories (`proc/meminfo`, …).
pub fn put(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Runs the sandbox of pod `name` (uid `uid-<name>`), its logs under `log_dir` when given.
pub async fn sandbox(cri: &CriClient, name: &str, log_dir: Option<&Path>) -> String {
    let config = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: name.into(),
            uid: format!("uid-{name}"),
            namespace: "default".into(),
            attempt: 0,
        }),
        log_directory: log_dir.map(|d| d.display().to_string()).unwrap_or_default(),
        ..Default::default()
    };
    let req = cri::RunPodSandboxRequest { config: Some(config), runtime_handler: String::new() };
    cri.run_pod_sandbox(req).await.unwrap().pod_sandbox_id
}

/// Creates container `name` of `image` in `sandbox`, logging to `<name>/0.log`, and starts it
/// when asked.
pub async fn container(
    cri: &CriClient,
    sandbox: &str,
    name: &str,
    image: &str,
    start: bool,
) -> String {
    let config = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: name.into(), attempt: 0 }),
        image: Some(cri::ImageSpec { image: image.into(), ..Default::default() }),
        log_path: format!("{name}/0.log"),
        ..Default::default()
    };
    let req = cri::CreateContainerRequest {
        pod_sandbox_id: sandbox.into(),
        config: Some(config),
        sandbox_config: None,
    };
    let id = cri.create_container(req).await.unwrap().container_id;
    if start {
        let req = cri::StartContainerRequest { container_id: id.clone() };
        cri.start_container(req).await.unwrap();
    }
    id
}
