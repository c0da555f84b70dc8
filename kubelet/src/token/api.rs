//! Tokens from the apiserver: a TokenRequest (authentication.k8s.io/v1) posted to
//! `/api/v1/namespaces/<ns>/serviceaccounts/<name>/token`, bound to the pod, with the kubelet's
//! client.

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, TokenRequest as ApiTokenRequest, TokenRequestSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;

use super::{Token, TokenError, TokenRequest, TokenSource};

/// Asks the apiserver for each token (no cache: [`super::TokenManager`] wraps it).
#[derive(Clone)]
pub struct ApiTokenSource {
    pub client: kube::Client,
}

impl std::fmt::Debug for ApiTokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTokenSource").finish_non_exhaustive()
    }
}

/// The TokenRequest upstream's kubelet posts for a projected volume.
pub fn request_body(request: &TokenRequest) -> ApiTokenRequest {
    ApiTokenRequest {
        spec: TokenRequestSpec {
            audiences: request.audiences.clone(),
            expiration_seconds: Some(request.expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(request.pod_name.clone()),
                uid: Some(request.pod_uid.clone()),
            }),
        },
        ..Default::default()
    }
}

impl TokenSource for ApiTokenSource {
    fn token<'a>(&'a self, request: &'a TokenRequest) -> BoxFuture<'a, Result<Token, TokenError>> {
        Box::pin(async move {
            let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &request.namespace);
            let failed = |message: String| TokenError::Request {
                namespace: request.namespace.clone(),
                service_account: request.service_account.clone(),
                pod: request.pod_name.clone(),
                message,
            };
            let answer = api
                .create_token_request(
                    &request.service_account,
                    &PostParams::default(),
                    &request_body(request),
                )
                .await
                .map_err(|e| match e {
                    kube::Error::Api(status) => failed(status.message.clone()),
                    other => failed(other.to_string()),
                })?;
            let status =
                answer.status.filter(|s| !s.token.is_empty()).ok_or_else(|| TokenError::Empty {
                    namespace: request.namespace.clone(),
                    service_account: request.service_account.clone(),
                    pod: request.pod_name.clone(),
                })?;
            let seconds = answer.spec.expiration_seconds.unwrap_or(request.expiration_seconds);
            Ok(Token {
                token: status.token,
                expiration: status.expiration_timestamp.0.into(),
                lifetime: Duration::from_secs(u64::try_from(seconds).unwrap_or(0)),
            })
        })
    }
}
