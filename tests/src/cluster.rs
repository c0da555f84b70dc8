//! [`JoinedNode`]: the smallest cluster the API-level tests need — apiserver-lite with a token
//! for the node, a private containerd with the test images, and a kubelet joined to the
//! apiserver — started in that order and torn down in the reverse one, leak-checked.

use crate::apiserver::ApiServer;
use crate::containerd::Containerd;
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
        let api = ApiServer::start_for_nodes_with(&[node], api_flags)?;
        let containerd = Containerd::start(Default::default()).await?;
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
