//! The garbage collector's API calls, on any kind (upstream's metadata client), behind
//! [`GcClient`]: read an object's metadata, delete with a propagation policy and the UID as
//! precondition, patch metadata (owner references, finalizers) with the resourceVersion as
//! precondition. [`DynamicClient`] is the real one, resolving kinds through discovery
//! ([`Resources`]); the tests fake it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::ApiResource;

use super::graph::ObjRef;
use crate::client::Propagation;

#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// Discovery does not know the kind (an owner reference to a kind that does not exist).
    #[error("{kind} in {api_version} is not served by the apiserver (owner of {of})")]
    UnknownKind { api_version: String, kind: String, of: String },
    #[error("{verb} {object}: {source}")]
    Request { verb: &'static str, object: String, source: Box<kube::Error> },
    #[error("{verb} {object}: conflict, retrying")]
    Conflict { verb: &'static str, object: String },
}

/// Calls on objects of any kind.
pub trait GcClient: Send + Sync + 'static {
    /// Whether `kind` in `api_version` is namespaced; `None` when it is not served.
    fn namespaced(&self, api_version: &str, kind: &str) -> Option<bool>;
    /// The object's metadata; `None` when there is none by that name.
    fn get(&self, r: &ObjRef) -> impl Future<Output = Result<Option<ObjectMeta>, GcError>> + Send;
    /// Deletes with `policy` and `r.uid` as precondition (gone already is success).
    fn delete(
        &self,
        r: &ObjRef,
        policy: Propagation,
    ) -> impl Future<Output = Result<(), GcError>> + Send;
    /// A JSON merge patch of `metadata` (its `resourceVersion` makes it conditional).
    fn patch_meta(
        &self,
        r: &ObjRef,
        metadata: serde_json::Value,
    ) -> impl Future<Output = Result<(), GcError>> + Send;
}

/// What discovery found: each kind's resource and scope.
#[derive(Debug, Default)]
pub struct Resources {
    by_kind: RwLock<HashMap<(String, String), (ApiResource, bool)>>,
}

impl Resources {
    pub fn insert(&self, ar: ApiResource, namespaced: bool) {
        self.by_kind
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((ar.api_version.clone(), ar.kind.clone()), (ar, namespaced));
    }

    pub fn get(&self, api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
        self.by_kind
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(api_version.to_string(), kind.to_string()))
            .cloned()
    }
}

/// The real client.
#[derive(Clone)]
pub struct DynamicClient {
    pub client: kube::Client,
    pub resources: Arc<Resources>,
}

impl std::fmt::Debug for DynamicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicClient").finish_non_exhaustive()
    }
}

impl DynamicClient {
    fn api(&self, r: &ObjRef) -> Result<Api<DynamicObject>, GcError> {
        let Some((ar, namespaced)) = self.resources.get(&r.api_version, &r.kind) else {
            return Err(GcError::UnknownKind {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                of: r.to_string(),
            });
        };
        Ok(if namespaced {
            Api::namespaced_with(self.client.clone(), &r.namespace, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        })
    }
}

fn request(verb: &'static str, r: &ObjRef, e: kube::Error) -> GcError {
    match e {
        kube::Error::Api(s) if s.code == 409 => GcError::Conflict { verb, object: r.to_string() },
        e => GcError::Request { verb, object: r.to_string(), source: Box::new(e) },
    }
}

impl GcClient for DynamicClient {
    fn namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.resources.get(api_version, kind).map(|(_, n)| n)
    }

    async fn get(&self, r: &ObjRef) -> Result<Option<ObjectMeta>, GcError> {
        match self.api(r)?.get_opt(&r.name).await {
            Ok(o) => Ok(o.map(|o| o.metadata)),
            Err(e) => Err(request("get", r, e)),
        }
    }

    async fn delete(&self, r: &ObjRef, policy: Propagation) -> Result<(), GcError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(r.uid.clone()), resource_version: None }),
            propagation_policy: Some(policy.as_kube()),
            ..Default::default()
        };
        match self.api(r)?.delete(&r.name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(request("delete", r, e)),
        }
    }

    async fn patch_meta(&self, r: &ObjRef, metadata: serde_json::Value) -> Result<(), GcError> {
        let patch = Patch::Merge(serde_json::json!({ "metadata": metadata }));
        match self.api(r)?.patch(&r.name, &PatchParams::default(), &patch).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(request("patch", r, e)),
        }
    }
}
