//! Who is asking, and what they may do:
//!
//! - this file: the [`User`] and the [`Authenticator`] that finds it, trying as upstream's
//!   union does: the client certificate, then a bearer token from the token file, then a
//!   service-account token;
//! - [`x509`]: client certificates (CN and O);
//! - [`token_file`]: the `--token-auth-file` tokens;
//! - [`service_account`]: service-account JWTs;
//! - [`impersonation`]: `Impersonate-*` headers (`kubectl --as`), each checked by the authorizer;
//! - [`authorizer`]: the `--authorization-mode` chain, over [`node`] (kubelets: the graph of
//!   what their pods reference) and [`rbac`].

pub mod authorizer;
pub mod impersonation;
pub mod node;
pub mod rbac;
pub mod service_account;
pub mod token_file;
pub mod x509;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

pub use authorizer::{Authorizer, Mode};
pub use service_account::{Authenticated, ServiceAccountTokens, TokenError};
pub use token_file::TokenFileError;
pub use x509::user_from_cert;

/// An authenticated identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Upstream's `extra` (a service account's pod and node, its credential id).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }

    /// The node a kubelet identity (`system:node:<name>` in `system:nodes`) speaks for.
    pub fn node(&self) -> Option<&str> {
        self.name
            .strip_prefix("system:node:")
            .filter(|_| self.groups.iter().any(|g| g == "system:nodes"))
    }
}

/// Why a bearer token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    /// No authenticator knows it (upstream's words).
    #[error("invalid bearer token")]
    Unknown,
    #[error(transparent)]
    ServiceAccount(#[from] TokenError),
}

#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    tokens: HashMap<String, User>,
    service_accounts: Option<Arc<ServiceAccountTokens>>,
}

impl Authenticator {
    /// Reads upstream's `--token-auth-file` format: `token,user,uid,"group1,group2"`.
    pub fn from_token_file(path: &Path) -> Result<Self, TokenFileError> {
        Ok(Self { tokens: token_file::read(path)?, service_accounts: None })
    }

    pub fn add_token(&mut self, token: &str, user: User) {
        self.tokens.insert(token.to_string(), user);
    }

    /// Accepts service-account tokens too.
    pub fn with_service_accounts(self, tokens: ServiceAccountTokens) -> Self {
        Self { service_accounts: Some(Arc::new(tokens)), ..self }
    }

    /// The user a request authenticates as: its client certificate, else its bearer token.
    pub fn authenticate(
        &self,
        authorization: Option<&str>,
        cert_user: Option<&User>,
    ) -> Option<User> {
        if let Some(u) = cert_user {
            return Some(u.clone());
        }
        let token = authorization?.strip_prefix("Bearer ")?.trim();
        match self.review(token, None, jiff::Timestamp::now().as_second()) {
            Ok(a) => Some(a.user),
            Err(e) => {
                tracing::debug!(error = %e, "bearer token refused");
                None
            }
        }
    }

    /// Whom a bearer token names and for which of `audiences` (the API's when `None`), at
    /// `now` (seconds): for requests, and for TokenReviews. Tokens from the token file are not
    /// bound to audiences: they are good for whatever is asked.
    pub fn review(
        &self,
        token: &str,
        audiences: Option<&[String]>,
        now: i64,
    ) -> Result<Authenticated, BearerError> {
        if token.is_empty() {
            return Err(BearerError::Unknown);
        }
        if let Some(user) = self.tokens.get(token) {
            let mut user = user.clone();
            if !user.groups.iter().any(|g| g == "system:authenticated") {
                user.groups.push("system:authenticated".into());
            }
            return Ok(Authenticated { user, audiences: audiences.unwrap_or_default().to_vec() });
        }
        match &self.service_accounts {
            Some(sa) => sa.authenticate(token, audiences, now)?.ok_or(BearerError::Unknown),
            None => Err(BearerError::Unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_use_upstreams_csv() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tokens.csv");
        std::fs::write(
            &f,
            "t1,alice,1001,\"dev,ops\"\nt2,system:node:n1,1002,system:nodes\n# comment\n",
        )
        .unwrap();
        let a = Authenticator::from_token_file(&f).unwrap();
        let alice = a.authenticate(Some("Bearer t1"), None).unwrap();
        assert_eq!(
            (alice.name.as_str(), alice.groups.as_slice()),
            ("alice", &["dev".to_string(), "ops".into(), "system:authenticated".into()][..])
        );
        assert!(a.authenticate(Some("Bearer nope"), None).is_none());
        assert!(a.authenticate(None, None).is_none());
        assert_eq!(a.review("", None, 0).unwrap_err(), BearerError::Unknown);
        std::fs::write(&f, "just-a-token\n").unwrap();
        assert!(Authenticator::from_token_file(&f).unwrap_err().to_string().contains(":1:"));
    }
}
