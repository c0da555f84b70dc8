//! Service-account tokens, as upstream's `pkg/serviceaccount` and the `serviceaccounts/token`
//! REST (TokenRequest) make them:
//!
//! - [`keys`]: the signing key and the verification keys (PEM files; generated on first
//!   start), key ids and JWKs; `der`: the DER they need written;
//! - [`jwt`]: compact JWS tokens, signed and checked;
//! - [`claims`]: what a token says (public claims and the `kubernetes.io` claim) and its time
//!   checks;
//! - [`token_request`]: `POST …/serviceaccounts/<name>/token`;
//! - [`openid`]: `/.well-known/openid-configuration` and `/openid/v1/jwks`.
//!
//! The authenticator that accepts these tokens is [`crate::auth::service_account`]; the
//! admission plugin that mounts them into pods is [`crate::admission::service_account`].

pub mod claims;
mod der;
pub mod jwt;
pub mod keys;
pub mod openid;
pub mod token_request;

use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use serde::de::DeserializeOwned;

use crate::registry::Registry;
use crate::resources::{self, ResourceType};

/// `--service-account-issuer` when none is given.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The ServiceAccount a pod without `serviceAccountName` runs as.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The lifetime the admission plugin asks for pods' tokens (an hour and 7 s): tokens asked
/// with exactly this are extended (upstream's `WarnOnlyBoundTokenExpirationSeconds`).
pub const WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS: i64 = 60 * 60 + 7;
/// How long an extended token is valid (a year, upstream's `ExpirationExtensionSeconds`).
pub const EXPIRATION_EXTENSION_SECONDS: i64 = 24 * 365 * 60 * 60;
/// A TokenRequest's `expirationSeconds` when it has none.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 60 * 60;
/// The shortest lifetime a token may be asked for (ten minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 10 * 60;
/// The longest (2^32 s).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// The `extra` keys of a service account's user info.
pub const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
pub const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
pub const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
pub const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";
pub const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// `system:serviceaccount:<namespace>:<name>`.
pub fn username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups of every service account of `namespace`.
pub fn groups(namespace: &str) -> Vec<String> {
    vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]
}

/// Where ServiceAccounts and the objects tokens are bound to are read: the store (the
/// [`Registry`]), or a map in tests.
pub trait Objects: Send + Sync + std::fmt::Debug {
    fn service_account(&self, namespace: &str, name: &str) -> Option<ServiceAccount>;
    fn pod(&self, namespace: &str, name: &str) -> Option<Pod>;
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret>;
    fn node(&self, name: &str) -> Option<Node>;
}

impl Registry {
    fn typed<T: DeserializeOwned>(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Option<T> {
        serde_json::from_value(self.get(r, ns, name).ok()?).ok()
    }
}

impl Objects for Registry {
    fn service_account(&self, namespace: &str, name: &str) -> Option<ServiceAccount> {
        self.typed(&resources::SERVICE_ACCOUNTS, Some(namespace), name)
    }
    fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.typed(&resources::PODS, Some(namespace), name)
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<Secret> {
        self.typed(&resources::SECRETS, Some(namespace), name)
    }
    fn node(&self, name: &str) -> Option<Node> {
        self.typed(&resources::NODES, None, name)
    }
}

/// How tokens are issued (kube-apiserver's flags of the same names).
#[derive(Debug)]
pub struct Issuer {
    /// The first `--service-account-issuer`: the `iss` of new tokens.
    pub issuer: String,
    /// `--api-audiences` (default: the issuer): a TokenRequest without audiences gets these.
    pub api_audiences: Vec<String>,
    /// `--service-account-signing-key-file`.
    pub key: keys::SigningKey,
    /// `--service-account-extend-token-expiration`: pods' admission-made tokens (asked for
    /// 3607 s, for the API's audiences) are valid a year, with `warnafter` at the hour.
    pub extend_expiration: bool,
    /// `--service-account-max-token-expiration`: longer requests are shortened to it.
    pub max_expiration_seconds: Option<i64>,
}

#[cfg(test)]
pub(crate) mod fake;
