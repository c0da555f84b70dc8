//! The service-account token authenticator, as upstream's `JWTTokenAuthenticator` with its
//! validator: a bearer JWT whose (unverified) issuer is one of ours is checked — signature by
//! a known key (picked by `kid`), issuer, audiences against the ones asked for (the API's by
//! default), times with a minute of leeway, and the ServiceAccount and the object the token is
//! bound to (pod, secret or node) still existing with the UIDs the token names and not deleted
//! more than the leeway ago. The user is `system:serviceaccount:<ns>:<name>` in
//! `system:serviceaccounts` and `system:serviceaccounts:<ns>`, with the pod, node and
//! credential id as `extra`. Any failure is an error naming why (a 401 for a request).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::User;
use crate::serviceaccount::claims::{Claims, LEEWAY_SECONDS, TimeError};
use crate::serviceaccount::jwt::{self, JwtError, Token};
use crate::serviceaccount::keys::PublicKey;
use crate::serviceaccount::{self as sa, Objects};

/// Why a token of our issuers is refused (upstream's words where it has them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Jwt(#[from] JwtError),
    #[error("the token's claims are not valid JSON: {0}")]
    Claims(String),
    #[error("token issuer {0:?} is invalid")]
    Issuer(String),
    #[error("token audiences {} is invalid for the target audiences {}", go_list(.token), go_list(.wanted))]
    Audience { token: Vec<String>, wanted: Vec<String> },
    #[error(transparent)]
    Time(#[from] TimeError),
    #[error("serviceaccounts {name:?} not found")]
    ServiceAccountNotFound { namespace: String, name: String },
    #[error("service account UID ({actual}) does not match claim ({claim})")]
    ServiceAccountUid { actual: String, claim: String },
    #[error("service account {namespace}/{name} has been deleted")]
    ServiceAccountDeleted { namespace: String, name: String },
    /// The bound object is gone or being deleted.
    #[error("service account token has been invalidated")]
    Invalidated,
    #[error("{kind} UID ({actual}) does not match service account {kind} ref claim ({claim})")]
    BoundUid { kind: &'static str, actual: String, claim: String },
}

/// A list as Go's `%q` prints a string slice: `["a" "b"]`.
fn go_list(v: &[String]) -> String {
    let quoted: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// Whom a token names, and for which of the audiences asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    pub user: User,
    pub audiences: Vec<String>,
}

/// The authenticator (`--service-account-issuer`, `--service-account-key-file`,
/// `--api-audiences`).
#[derive(Debug, Clone)]
pub struct ServiceAccountTokens {
    pub issuers: Vec<String>,
    pub keys: Vec<PublicKey>,
    /// The API's audiences: what tokens are checked against unless a TokenReview asks for
    /// others, and what a token without audiences is taken to be for.
    pub api_audiences: Vec<String>,
    pub objects: Arc<dyn Objects>,
}

/// Whether an object was deleted more than the leeway before `now`.
fn deleted_before_leeway(meta: &ObjectMeta, now: i64) -> bool {
    meta.deletion_timestamp.as_ref().is_some_and(|t| t.0.as_second() < now - LEEWAY_SECONDS)
}

impl ServiceAccountTokens {
    /// `Ok(None)`: not a token of our issuers (another authenticator may know it).
    pub fn authenticate(
        &self,
        token: &str,
        audiences: Option<&[String]>,
        now: i64,
    ) -> Result<Option<Authenticated>, TokenError> {
        match jwt::unverified_issuer(token) {
            Some(iss) if self.issuers.contains(&iss) => {}
            _ => return Ok(None),
        }
        let parsed = Token::parse(token)?;
        parsed.verify(&self.keys)?;
        let claims: Claims = serde_json::from_slice(&parsed.payload)
            .map_err(|e| TokenError::Claims(e.to_string()))?;
        if !self.issuers.contains(&claims.iss) {
            return Err(TokenError::Issuer(claims.iss));
        }
        let token_auds =
            if claims.aud.is_empty() { self.api_audiences.clone() } else { claims.aud.clone() };
        let wanted = audiences.unwrap_or(&self.api_audiences);
        let auds: Vec<String> = token_auds.iter().filter(|a| wanted.contains(a)).cloned().collect();
        if auds.is_empty() && !self.api_audiences.is_empty() {
            return Err(TokenError::Audience { token: token_auds, wanted: wanted.to_vec() });
        }
        let user = self.validate(&claims, now)?;
        Ok(Some(Authenticated { user, audiences: auds }))
    }

    /// Upstream's validator: times, then the ServiceAccount, the secret, the pod, the node.
    fn validate(&self, claims: &Claims, now: i64) -> Result<User, TokenError> {
        claims.check_time(now)?;
        let k = &claims.kubernetes;
        let (ns, account) = (k.namespace.as_str(), &k.serviceaccount);
        let found = self.objects.service_account(ns, &account.name).ok_or_else(|| {
            TokenError::ServiceAccountNotFound {
                namespace: ns.to_string(),
                name: account.name.clone(),
            }
        })?;
        let uid = found.metadata.uid.clone().unwrap_or_default();
        if uid != account.uid {
            return Err(TokenError::ServiceAccountUid { actual: uid, claim: account.uid.clone() });
        }
        if deleted_before_leeway(&found.metadata, now) {
            return Err(TokenError::ServiceAccountDeleted {
                namespace: ns.to_string(),
                name: account.name.clone(),
            });
        }
        let check = |kind: &'static str, meta: Option<ObjectMeta>, claim: &str| {
            let meta = meta.ok_or(TokenError::Invalidated)?;
            let actual = meta.uid.clone().unwrap_or_default();
            if actual != claim {
                return Err(TokenError::BoundUid { kind, actual, claim: claim.to_string() });
            }
            if deleted_before_leeway(&meta, now) {
                return Err(TokenError::Invalidated);
            }
            Ok(())
        };
        if let Some(s) = &k.secret {
            check("secret", self.objects.secret(ns, &s.name).map(|s| s.metadata), &s.uid)?;
        }
        let mut extra = BTreeMap::new();
        if let Some(p) = &k.pod {
            check("pod", self.objects.pod(ns, &p.name).map(|p| p.metadata), &p.uid)?;
            if !p.name.is_empty() && !p.uid.is_empty() {
                extra.insert(sa::EXTRA_POD_NAME.to_string(), vec![p.name.clone()]);
                extra.insert(sa::EXTRA_POD_UID.to_string(), vec![p.uid.clone()]);
            }
        }
        if let Some(n) = &k.node {
            // A pod-bound token only names its node; a node-bound one needs the Node.
            if k.pod.is_none() {
                check("node", self.objects.node(&n.name).map(|n| n.metadata), &n.uid)?;
            }
            if !n.name.is_empty() {
                extra.insert(sa::EXTRA_NODE_NAME.to_string(), vec![n.name.clone()]);
                if !n.uid.is_empty() {
                    extra.insert(sa::EXTRA_NODE_UID.to_string(), vec![n.uid.clone()]);
                }
            }
        }
        if !claims.jti.is_empty() {
            extra.insert(sa::EXTRA_CREDENTIAL_ID.to_string(), vec![format!("JTI={}", claims.jti)]);
        }
        let mut groups = sa::groups(ns);
        groups.push("system:authenticated".into());
        Ok(User { name: sa::username(ns, &account.name), uid: account.uid.clone(), groups, extra })
    }
}

#[cfg(test)]
mod tests;
