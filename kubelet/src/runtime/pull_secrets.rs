//! A pod's image pull secrets, fetched from the apiserver when an image is to be pulled
//! (upstream's `getPullSecretsForPod`). One that cannot be had (missing, forbidden, no
//! apiserver) is left out and named, and the pull goes on without it, as upstream's does.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Secret};

/// Where Secrets come from: the apiserver (a fake in unit tests).
pub trait SecretSource: Send + Sync + std::fmt::Debug {
    /// The Secret `namespace/name`; `None` when it does not exist.
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, kube::Error>>;
}

/// The apiserver, through the kubelet's own client.
#[derive(Clone)]
pub struct ApiSecrets(pub kube::Client);

impl std::fmt::Debug for ApiSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiSecrets")
    }
}

impl SecretSource for ApiSecrets {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, kube::Error>> {
        Box::pin(async move {
            kube::Api::<Secret>::namespaced(self.0.clone(), namespace).get_opt(name).await
        })
    }
}

/// What a pod's pull secrets came to.
#[derive(Debug, Default)]
pub struct PullSecrets {
    pub found: Vec<Secret>,
    /// The names of those that could not be had.
    pub failed: Vec<String>,
}

/// Fetches `pod`'s image pull secrets from `source` (none: the kubelet has no apiserver).
/// Entries without a name are skipped, as upstream skips them.
pub async fn fetch(source: Option<&Arc<dyn SecretSource>>, pod: &Pod) -> PullSecrets {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let refs = pod.spec.as_ref().and_then(|s| s.image_pull_secrets.as_ref());
    let mut out = PullSecrets::default();
    for name in refs.into_iter().flatten().map(|r| r.name.as_str()).filter(|n| !n.is_empty()) {
        let got = match source {
            Some(source) => source.get(namespace, name).await,
            None => Ok(None),
        };
        match got {
            Ok(Some(secret)) => out.found.push(secret),
            Ok(None) => {
                tracing::info!(
                    pod = pod.metadata.name.as_deref().unwrap_or_default(),
                    namespace,
                    secret = name,
                    apiserver = source.is_some(),
                    "Unable to retrieve pull secret, the image pull may not succeed."
                );
                out.failed.push(name.to_string());
            }
            Err(error) => {
                tracing::info!(pod = pod.metadata.name.as_deref().unwrap_or_default(), namespace, secret = name, %error, "Unable to retrieve pull secret, the image pull may not succeed.");
                out.failed.push(name.to_string());
            }
        }
    }
    out
}

/// Secrets in memory, for tests.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct FakeSecrets {
    pub secrets: std::sync::Mutex<Vec<Secret>>,
    /// Names that answer with an error instead.
    pub failing: Vec<String>,
}

#[cfg(test)]
impl SecretSource for FakeSecrets {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, kube::Error>> {
        Box::pin(async move {
            if self.failing.iter().any(|f| f == name) {
                let status = kube::core::Status::failure("forbidden", "Forbidden");
                return Err(kube::Error::Api(Box::new(status.with_code(403))));
            }
            let secrets = self.secrets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            Ok(secrets
                .iter()
                .find(|s| {
                    s.metadata.namespace.as_deref() == Some(namespace)
                        && s.metadata.name.as_deref() == Some(name)
                })
                .cloned())
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn secret(name: &str) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.metadata.namespace = Some("team".into());
        s
    }

    fn pod(refs: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"containers": [], "imagePullSecrets": refs.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>()},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn found_secrets_are_kept_and_the_others_named() {
        let source: Arc<dyn SecretSource> = Arc::new(FakeSecrets {
            secrets: std::sync::Mutex::new(vec![secret("a"), secret("b")]),
            failing: vec!["broken".into()],
        });
        let got = fetch(Some(&source), &pod(&["a", "missing", "", "broken", "b"])).await;
        let names: Vec<_> = got.found.iter().filter_map(|s| s.metadata.name.clone()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(got.failed, ["missing", "broken"]);
        let standalone = fetch(None, &pod(&["a"])).await;
        assert_eq!((standalone.found.len(), standalone.failed), (0, vec!["a".to_string()]));
        assert!(fetch(Some(&source), &pod(&[])).await.failed.is_empty());
    }
}
