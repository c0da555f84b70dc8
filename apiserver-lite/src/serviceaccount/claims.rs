//! A service-account token's claims, as upstream's `pkg/serviceaccount/claims.go` writes them:
//! the public ones (`iss`, `sub` = `system:serviceaccount:<ns>:<name>`, `aud`, `iat`, `nbf`,
//! `exp`, `jti`) and the private `kubernetes.io` claim naming the namespace, the
//! ServiceAccount, the object the token is bound to (a pod with its node, a secret, or a node)
//! by name and UID, and `warnafter` for the extended tokens of pods. Keys are written in Go's
//! order (sorted), so our tokens read like upstream's.

use serde::{Deserialize, Deserializer, Serialize};

/// The clock skew allowed when checking times (go-jose's `DefaultLeeway`).
pub const LEEWAY_SECONDS: i64 = 60;

/// An object a token names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl Ref {
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> Self {
        Ref { name: name.into(), uid: uid.into() }
    }
}

/// The private `kubernetes.io` claim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kubernetes {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Ref>,
    #[serde(default)]
    pub serviceaccount: Ref,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub warnafter: Option<i64>,
}

/// Every claim of a service-account token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "audience")]
    pub aud: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub exp: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub iat: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iss: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    #[serde(rename = "kubernetes.io", default)]
    pub kubernetes: Kubernetes,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub nbf: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
}

/// `aud` is a string or a list of them (RFC 7519).
fn audience<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<Aud>::deserialize(d)? {
        None => Vec::new(),
        Some(Aud::One(a)) => vec![a],
        Some(Aud::Many(a)) => a,
    })
}

/// Seconds since the epoch, whole or fractional (truncated, as go-jose reads them).
fn numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let n = Option::<serde_json::Number>::deserialize(d)?;
    Ok(n.and_then(|n| n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))))
}

/// What a token is bound to, beyond its ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// A pod, and the node it is assigned to when it is (the node's UID when the Node exists).
    Pod {
        pod: Ref,
        node: Option<Ref>,
    },
    Secret(Ref),
    Node(Ref),
}

/// What a new token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub issuer: String,
    pub namespace: String,
    pub service_account: Ref,
    pub bound: Option<Bound>,
    pub audiences: Vec<String>,
    /// Seconds since the epoch.
    pub now: i64,
    /// How long the token is valid (its `exp` is `now` plus this).
    pub expiration_seconds: i64,
    /// For an extended token: when use of it should be warned about.
    pub warn_after_seconds: Option<i64>,
    pub jti: String,
}

impl Claims {
    /// Upstream's `Claims`.
    pub fn new(i: Issue) -> Self {
        let (mut pod, mut secret, mut node) = (None, None, None);
        match i.bound {
            Some(Bound::Pod { pod: p, node: n }) => (pod, node) = (Some(p), n),
            Some(Bound::Secret(s)) => secret = Some(s),
            Some(Bound::Node(n)) => node = Some(n),
            None => {}
        }
        Claims {
            aud: i.audiences,
            exp: Some(i.now + i.expiration_seconds),
            iat: Some(i.now),
            iss: i.issuer,
            jti: i.jti,
            kubernetes: Kubernetes {
                namespace: i.namespace.clone(),
                node,
                pod,
                secret,
                serviceaccount: i.service_account.clone(),
                warnafter: i.warn_after_seconds.map(|w| i.now + w),
            },
            nbf: Some(i.now),
            sub: super::username(&i.namespace, &i.service_account.name),
        }
    }
}

/// Why a token's times make it invalid (upstream's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("service account token is not valid yet")]
    NotValidYet,
    #[error("service account token has expired")]
    Expired,
    #[error("service account token is issued in the future")]
    IssuedInTheFuture,
}

impl Claims {
    /// go-jose's time checks at `now` with its minute of leeway: `nbf`, `exp`, then `iat`.
    pub fn check_time(&self, now: i64) -> Result<(), TimeError> {
        if self.nbf.is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
            return Err(TimeError::NotValidYet);
        }
        if self.exp.is_some_and(|exp| now - LEEWAY_SECONDS > exp) {
            return Err(TimeError::Expired);
        }
        if self.iat.is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
            return Err(TimeError::IssuedInTheFuture);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn issue(bound: Option<Bound>, warn: Option<i64>) -> Claims {
        Claims::new(Issue {
            issuer: "https://kubernetes.default.svc.cluster.local".into(),
            namespace: "ns".into(),
            service_account: Ref::new("default", "sa-uid"),
            bound,
            audiences: vec!["https://kubernetes.default.svc.cluster.local".into()],
            now: 1_700_000_000,
            expiration_seconds: 3600,
            warn_after_seconds: warn,
            jti: "j-1".into(),
        })
    }

    #[test]
    fn a_pod_bound_token_names_the_pod_and_its_node_in_upstreams_shape() {
        let pod =
            Bound::Pod { pod: Ref::new("web", "pod-uid"), node: Some(Ref::new("n1", "node-uid")) };
        let claims = issue(Some(pod), None);
        assert_eq!(
            serde_json::to_string(&claims).unwrap(),
            json!({
                "aud": ["https://kubernetes.default.svc.cluster.local"],
                "exp": 1_700_003_600, "iat": 1_700_000_000,
                "iss": "https://kubernetes.default.svc.cluster.local",
                "jti": "j-1",
                "kubernetes.io": {
                    "namespace": "ns",
                    "node": {"name": "n1", "uid": "node-uid"},
                    "pod": {"name": "web", "uid": "pod-uid"},
                    "serviceaccount": {"name": "default", "uid": "sa-uid"},
                },
                "nbf": 1_700_000_000,
                "sub": "system:serviceaccount:ns:default",
            })
            .to_string(),
            "the keys in Go's (sorted) order"
        );
        let secret = issue(Some(Bound::Secret(Ref::new("s", "s-uid"))), Some(3607));
        assert_eq!(secret.kubernetes.secret, Some(Ref::new("s", "s-uid")));
        assert_eq!(secret.kubernetes.warnafter, Some(1_700_003_607));
        assert_eq!(issue(None, None).kubernetes.pod, None);
    }

    #[test]
    fn claims_read_back_with_either_audience_form_and_fractional_dates() {
        let c: Claims = serde_json::from_value(json!({
            "aud": "one", "exp": 1_700_000_000.9, "kubernetes.io": {"namespace": "x"}
        }))
        .unwrap();
        assert_eq!(
            (c.aud, c.exp, c.kubernetes.namespace.as_str()),
            (vec!["one".to_string()], Some(1_700_000_000), "x")
        );
        let original = issue(Some(Bound::Node(Ref::new("n", "u"))), Some(10));
        let back: Claims = serde_json::from_slice(&serde_json::to_vec(&original).unwrap()).unwrap();
        assert_eq!(back, original);
    }

    #[test]
    fn times_are_checked_with_a_minute_of_leeway() {
        let c = issue(None, None);
        let (iat, exp) = (c.iat.unwrap(), c.exp.unwrap());
        assert_eq!(c.check_time(iat), Ok(()));
        assert_eq!(c.check_time(exp + 60), Ok(()), "within the leeway");
        assert_eq!(c.check_time(exp + 61), Err(TimeError::Expired));
        assert_eq!(c.check_time(iat - 60), Ok(()));
        assert_eq!(c.check_time(iat - 61), Err(TimeError::NotValidYet));
        let future = Claims { nbf: None, ..c };
        assert_eq!(future.check_time(iat - 61), Err(TimeError::IssuedInTheFuture));
        assert_eq!(Claims::default().check_time(0), Ok(()), "no times: nothing to check");
    }
}
