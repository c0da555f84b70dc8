//! [`JoinedNode`]: the smallest cluster the API-level tests need — apiserver-lite with a token
//! for the node, a private containerd with the test images, and a kubelet joined to the
//! apiserver — started in that order and torn down in the reverse one, leak-checked.
//! [`StandaloneNode`]: the same without the apiserver, for static pods alone.

use std::time::Duration;

use proto::CriClient;

use crate::apiserver::ApiServer;
use crate::containerd::{Containerd, ContainerdOptions};
use crate::kubelet::Kubelet;

#[derive(Debug)]
pub struct JoinedNode {
    pub api: ApiServer,
    pub containerd: Containerd,
    pub kubelet: Kubelet,
}

impl JoinedNode {
    pub async fn start(node: &str) -> anyhow::Result<Self> {
        Self::start_with_kubelet_flags(node, &[]).await
    }

    /// [`JoinedNode::start`], the kubelet started with more flags.
    pub async fn start_with_kubelet_flags(node: &str, flags: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(node, &[], flags).await
    }

    /// [`JoinedNode::start`], apiserver-lite and the kubelet started with more flags (e.g.
    /// [`crate::apiserver::SERVICE_ACCOUNTS`]).
    pub async fn start_with(
        node: &str,
        api_flags: &[&str],
        kubelet_flags: &[&str],
    ) -> anyhow::Result<Self> {
        Self::start_on(node, ContainerdOptions::default(), api_flags, kubelet_flags).await
    }

    /// [`JoinedNode::start_with`] on a containerd started with `options` (e.g. on a tmpfs).
    pub async fn start_on(
        node: &str,
        options: ContainerdOptions,
        api_flags: &[&str],
        kubelet_flags: &[&str],
    ) -> anyhow::Result<Self> {
        let api = ApiServer::start_for_nodes_with(&[node], api_flags)?;
        let containerd = Containerd::start(options).await?;
        containerd.import_test_images()?;
        let kubeconfig = api.node_kubeconfig(node)?;
        let kubelet = Kubelet::start_joined_with(&containerd, node, &kubeconfig, kubelet_flags)?;
        Ok(Self { api, containerd, kubelet })
    }

    /// `what`, followed by the tails of the kubelet's, the apiserver's and containerd's logs: a
    /// failure message.
    pub fn logs(&self, what: &str) -> String {
        format!(
            "{what}\nkubelet:\n{}\napiserver:\n{}\ncontainerd:\n{}",
            self.kubelet.log_tail(40),
            self.api.log_tail(20),
            self.containerd.log_tail(20)
        )
    }

    /// Stops the kubelet (pods keep running), the apiserver, then containerd with every pod;
    /// an error lists whatever teardown left behind.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.kubelet.stop();
        drop(self.api);
        let report = self.containerd.stop().await;
        anyhow::ensure!(report.is_clean(), "teardown leaked: {report:#?}");
        Ok(())
    }
}

/// A private containerd with the test images and a kubelet with no apiserver (static pods
/// only), and a CRI client to look at the runtime directly.
#[derive(Debug)]
pub struct StandaloneNode {
    containerd: Option<Containerd>,
    pub kubelet: Kubelet,
    pub cri: CriClient,
}

impl StandaloneNode {
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(&[]).await
    }

    /// [`StandaloneNode::start`] with more kubelet flags.
    pub async fn start_with(flags: &[&str]) -> anyhow::Result<Self> {
        Self::start_with_config("", flags).await
    }

    /// [`StandaloneNode::start`] with more `KubeletConfiguration` lines and kubelet flags.
    pub async fn start_with_config(config: &str, flags: &[&str]) -> anyhow::Result<Self> {
        let containerd = Containerd::start(Default::default()).await?;
        containerd.import_test_images()?;
        let kubelet = Kubelet::start_standalone_with_config(&containerd, config, flags)?;
        let cri = containerd.client().await?;
        Ok(Self { containerd: Some(containerd), kubelet, cri })
    }

    /// The kubelet's `cgroupRoot` (the test containerd's own cgroup, e.g. `/e2e-1a2b3c`).
    pub fn cgroup_root(&self) -> String {
        self.containerd.as_ref().map(Containerd::cgroup_parent).unwrap_or_default()
    }

    /// Every sandbox the runtime holds.
    pub async fn sandboxes(&self) -> Vec<proto::cri::PodSandbox> {
        let req = proto::cri::ListPodSandboxRequest { filter: None };
        match self.cri.list_pod_sandbox(req).await {
            Ok(r) => r.items,
            Err(e) => self.fail(format!("ListPodSandbox: {e}")),
        }
    }

    /// Fails the test with `what` and the tail of the kubelet's log.
    pub fn fail(&self, what: impl std::fmt::Display) -> ! {
        panic!("{what}\nkubelet log:\n{}", self.kubelet.log_tail(60))
    }

    /// The pod as the kubelet's `/pods` shows it once its containers run, within `wait`.
    pub async fn running(&self, name: &str, wait: Duration, poll: Duration) -> serde_json::Value {
        let what = format!("{name} running");
        match crate::eventually(&what, wait, poll, || self.kubelet.running(name)).await {
            Ok(p) => p,
            Err(e) => self.fail(e),
        }
    }

    /// Stops the kubelet, then containerd with every pod; panics listing what teardown left.
    pub async fn teardown(mut self) {
        self.kubelet.stop();
        if let Some(containerd) = self.containerd.take() {
            let report = containerd.stop().await;
            assert!(report.is_clean(), "teardown leaked: {report:#?}");
        }
    }
}
