//! Every API call a controller makes, behind the [`Client`] trait (one implementation per kind
//! over kube-rs, [`KubeClient`]; the hermetic tests' fake is `fake::FakeApi`): an uncached read
//! (`get`, upstream's quorum read before adopting), create, replace, replace the status,
//! adopt or release through an owner-reference patch, and delete.

use std::fmt::Debug;
use std::future::Future;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Which call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Create,
    Update,
    UpdateStatus,
    Patch,
    Delete,
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verb::Get => "get",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::UpdateStatus => "update status of",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        })
    }
}

/// Why a call failed, classified by the status code the apiserver answered.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{verb} {kind} {key}: not found")]
    NotFound { verb: Verb, kind: String, key: String },
    #[error("{verb} {kind} {key}: already exists")]
    AlreadyExists { verb: Verb, kind: String, key: String },
    /// A stale resourceVersion or a failed precondition: read again and retry.
    #[error("{verb} {kind} {key}: conflict: {message}")]
    Conflict { verb: Verb, kind: String, key: String, message: String },
    /// Refused (validation, authorization, a terminating namespace, ...).
    #[error("{verb} {kind} {key}: {message}")]
    Rejected { verb: Verb, kind: String, key: String, code: u16, message: String },
    /// No answer (connection, timeout, 5xx).
    #[error("{verb} {kind} {key}: {source}")]
    Request { verb: Verb, kind: String, key: String, source: Box<kube::Error> },
}

impl ApiError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::NotFound { .. })
    }

    pub fn is_already_exists(&self) -> bool {
        matches!(self, ApiError::AlreadyExists { .. })
    }

    pub fn is_conflict(&self) -> bool {
        matches!(self, ApiError::Conflict { .. })
    }

    /// Classifies a kube-rs error by its status code (never by its text).
    pub fn from_kube(verb: Verb, kind: &str, key: String, e: kube::Error) -> Self {
        let kind = kind.to_string();
        match e {
            kube::Error::Api(s) if s.code == 404 => ApiError::NotFound { verb, kind, key },
            kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists" => {
                ApiError::AlreadyExists { verb, kind, key }
            }
            kube::Error::Api(s) if s.code == 409 => {
                ApiError::Conflict { verb, kind, key, message: s.message }
            }
            kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429 => {
                ApiError::Rejected { verb, kind, key, code: s.code, message: s.message }
            }
            e => ApiError::Request { verb, kind, key, source: Box::new(e) },
        }
    }
}

/// An owner-reference change, sent as upstream's strategic merge patches with the object's UID
/// as precondition.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnerPatch {
    /// Add `owner` (a controller reference): upstream's adoption.
    Adopt { owner: OwnerReference, uid: String },
    /// Remove the reference to `owner_uid`: upstream's release.
    Release { owner_uid: String, uid: String },
}

impl OwnerPatch {
    pub fn body(&self) -> serde_json::Value {
        match self {
            OwnerPatch::Adopt { owner, uid } => {
                json!({"metadata": {"ownerReferences": [owner], "uid": uid}})
            }
            OwnerPatch::Release { owner_uid, uid } => json!({"metadata": {
                "ownerReferences": [{"$patch": "delete", "uid": owner_uid}], "uid": uid}}),
        }
    }
}

/// The calls a controller makes on objects of kind `K`.
pub trait Client<K>: Send + Sync + 'static {
    /// An uncached read.
    fn get(&self, ns: &str, name: &str) -> impl Future<Output = Result<K, ApiError>> + Send;
    /// Creates `obj` in its namespace (`generateName` honoured); the stored object.
    fn create(&self, obj: &K) -> impl Future<Output = Result<K, ApiError>> + Send;
    /// Replaces the object (optimistic: its resourceVersion must be current).
    fn replace(&self, obj: &K) -> impl Future<Output = Result<K, ApiError>> + Send;
    /// Replaces the status subresource.
    fn replace_status(&self, obj: &K) -> impl Future<Output = Result<K, ApiError>> + Send;
    fn patch_owner(
        &self,
        ns: &str,
        name: &str,
        patch: &OwnerPatch,
    ) -> impl Future<Output = Result<K, ApiError>> + Send;
    /// Deletes, with the UID as precondition when given.
    fn delete(
        &self,
        ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Removes `finalizer` from the object (a strategic merge `$deleteFromPrimitiveList`).
    fn remove_finalizer(
        &self,
        ns: &str,
        name: &str,
        finalizer: &str,
    ) -> impl Future<Output = Result<K, ApiError>> + Send;
    /// Deletes with a `propagationPolicy` and the UID as precondition.
    fn delete_propagating(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        policy: Propagation,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// A delete's `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn as_kube(self) -> kube::api::PropagationPolicy {
        match self {
            Propagation::Background => kube::api::PropagationPolicy::Background,
            Propagation::Foreground => kube::api::PropagationPolicy::Foreground,
            Propagation::Orphan => kube::api::PropagationPolicy::Orphan,
        }
    }
}

/// The strategic merge patch removing one finalizer.
pub fn remove_finalizer_patch(finalizer: &str) -> serde_json::Value {
    json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [finalizer]}})
}

/// The real client.
#[derive(Clone)]
pub struct KubeClient {
    pub client: kube::Client,
}

impl Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient").finish_non_exhaustive()
    }
}

fn kind_of<K: Resource>() -> String
where
    K::DynamicType: Default,
{
    K::kind(&K::DynamicType::default()).to_lowercase()
}

impl<K> Client<K> for KubeClient
where
    K: Resource<Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default,
{
    async fn get(&self, ns: &str, name: &str) -> Result<K, ApiError> {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        api.get(name)
            .await
            .map_err(|e| ApiError::from_kube(Verb::Get, &kind_of::<K>(), format!("{ns}/{name}"), e))
    }

    async fn create(&self, obj: &K) -> Result<K, ApiError> {
        let ns = obj.namespace().unwrap_or_default();
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        let name = obj.meta().name.clone().or(obj.meta().generate_name.clone()).unwrap_or_default();
        api.create(&PostParams::default(), obj).await.map_err(|e| {
            ApiError::from_kube(Verb::Create, &kind_of::<K>(), format!("{ns}/{name}"), e)
        })
    }

    async fn replace(&self, obj: &K) -> Result<K, ApiError> {
        let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        api.replace(&name, &PostParams::default(), obj).await.map_err(|e| {
            ApiError::from_kube(Verb::Update, &kind_of::<K>(), format!("{ns}/{name}"), e)
        })
    }

    async fn replace_status(&self, obj: &K) -> Result<K, ApiError> {
        let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        api.replace_status(&name, &PostParams::default(), obj).await.map_err(|e| {
            ApiError::from_kube(Verb::UpdateStatus, &kind_of::<K>(), format!("{ns}/{name}"), e)
        })
    }

    async fn patch_owner(&self, ns: &str, name: &str, patch: &OwnerPatch) -> Result<K, ApiError> {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        api.patch(name, &PatchParams::default(), &Patch::Strategic(patch.body())).await.map_err(
            |e| ApiError::from_kube(Verb::Patch, &kind_of::<K>(), format!("{ns}/{name}"), e),
        )
    }

    async fn delete(&self, ns: &str, name: &str, uid: Option<&str>) -> Result<(), ApiError> {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        let params = DeleteParams {
            preconditions: uid
                .map(|u| Preconditions { uid: Some(u.to_string()), resource_version: None }),
            ..Default::default()
        };
        api.delete(name, &params).await.map(|_| ()).map_err(|e| {
            ApiError::from_kube(Verb::Delete, &kind_of::<K>(), format!("{ns}/{name}"), e)
        })
    }

    async fn remove_finalizer(&self, ns: &str, name: &str, finalizer: &str) -> Result<K, ApiError> {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        let patch = Patch::Strategic(remove_finalizer_patch(finalizer));
        api.patch(name, &PatchParams::default(), &patch).await.map_err(|e| {
            ApiError::from_kube(Verb::Patch, &kind_of::<K>(), format!("{ns}/{name}"), e)
        })
    }

    async fn delete_propagating(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        policy: Propagation,
    ) -> Result<(), ApiError> {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            propagation_policy: Some(policy.as_kube()),
            ..Default::default()
        };
        api.delete(name, &params).await.map(|_| ()).map_err(|e| {
            ApiError::from_kube(Verb::Delete, &kind_of::<K>(), format!("{ns}/{name}"), e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_patches_are_upstreams_strategic_merge_patches() {
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let adopt = OwnerPatch::Adopt { owner, uid: "pod-uid".into() }.body();
        assert_eq!(adopt["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(adopt["metadata"]["uid"], "pod-uid");
        let release =
            OwnerPatch::Release { owner_uid: "rs-uid".into(), uid: "pod-uid".into() }.body();
        assert_eq!(
            release["metadata"]["ownerReferences"],
            json!([{"$patch": "delete", "uid": "rs-uid"}])
        );
    }
}
