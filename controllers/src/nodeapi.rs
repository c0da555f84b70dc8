//! The API calls on nodes (cluster-scoped, so outside the namespaced [`Client`]) and the force
//! deletion of pods, behind the [`NodeApi`] trait: the node lifecycle controller writes node
//! conditions and taints, the pod GC checks whether a node still exists and force-deletes.

use std::future::Future;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};

use crate::client::{ApiError, KubeClient, Verb};

pub trait NodeApi: Send + Sync + 'static {
    /// An uncached read.
    fn get_node(&self, name: &str) -> impl Future<Output = Result<Node, ApiError>> + Send;
    /// Replaces the node (its taints; optimistic on resourceVersion).
    fn replace_node(&self, node: &Node) -> impl Future<Output = Result<Node, ApiError>> + Send;
    /// Replaces the node's status (its conditions).
    fn replace_node_status(
        &self,
        node: &Node,
    ) -> impl Future<Output = Result<Node, ApiError>> + Send;
    /// Deletes a pod with a zero grace period (what upstream's `NewDeleteOptions(0)` does).
    fn force_delete_pod(
        &self,
        ns: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

impl NodeApi for KubeClient {
    async fn get_node(&self, name: &str) -> Result<Node, ApiError> {
        let api: Api<Node> = Api::all(self.client.clone());
        api.get(name).await.map_err(|e| ApiError::from_kube(Verb::Get, "node", name.into(), e))
    }

    async fn replace_node(&self, node: &Node) -> Result<Node, ApiError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = name_of(node);
        api.replace(&name, &PostParams::default(), node)
            .await
            .map_err(|e| ApiError::from_kube(Verb::Update, "node", name, e))
    }

    async fn replace_node_status(&self, node: &Node) -> Result<Node, ApiError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = name_of(node);
        api.replace_status(&name, &PostParams::default(), node)
            .await
            .map_err(|e| ApiError::from_kube(Verb::UpdateStatus, "node", name, e))
    }

    async fn force_delete_pod(&self, ns: &str, name: &str) -> Result<(), ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let params = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        api.delete(name, &params)
            .await
            .map(|_| ())
            .map_err(|e| ApiError::from_kube(Verb::Delete, "pod", format!("{ns}/{name}"), e))
    }
}

#[cfg(test)]
mod fake {
    use super::*;
    use crate::client::Client;
    use crate::fake::FakeApi;

    impl NodeApi for FakeApi {
        async fn get_node(&self, name: &str) -> Result<Node, ApiError> {
            Client::<Node>::get(self, "", name).await
        }
        async fn replace_node(&self, node: &Node) -> Result<Node, ApiError> {
            Client::<Node>::replace(self, node).await
        }
        async fn replace_node_status(&self, node: &Node) -> Result<Node, ApiError> {
            Client::<Node>::replace_status(self, node).await
        }
        async fn force_delete_pod(&self, ns: &str, name: &str) -> Result<(), ApiError> {
            Client::<Pod>::delete(self, ns, name, None).await
        }
    }
}
