//! Authentication (bearer tokens from upstream's token file, client certificates) and the
//! interim authorizer: `system:masters` may do anything; any other identity may read and ask
//! the reviews, and may write only its own node's objects (until RBAC and the node authorizer
//! arrive). [`crate::reviews`] lists the same rules for `kubectl auth can-i --list`.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::ResourceType;

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
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

/// Splits one CSV line, honouring double quotes.
fn csv_fields(line: &str) -> Vec<String> {
    let (mut out, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    out.push(field);
    out
}

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}:{line}: want token,user,uid[,\"group1,group2\"]")]
    Format { path: String, line: usize },
}

#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    tokens: HashMap<String, User>,
}

impl Authenticator {
    /// Reads upstream's `--token-auth-file` format: `token,user,uid,"group1,group2"`.
    pub fn from_token_file(path: &Path) -> Result<Self, TokenFileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| TokenFileError::Read { path: p.clone(), source })?;
        let mut tokens = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let f = csv_fields(line);
            if f.len() < 3 || f[0].is_empty() || f[1].is_empty() {
                return Err(TokenFileError::Format { path: p, line: i + 1 });
            }
            let groups = f
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            tokens.insert(f[0].clone(), User { name: f[1].clone(), uid: f[2].clone(), groups });
        }
        Ok(Self { tokens })
    }

    pub fn add_token(&mut self, token: &str, user: User) {
        self.tokens.insert(token.to_string(), user);
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
        self.user_for_token(authorization?.strip_prefix("Bearer ")?.trim())
    }

    /// Whom a bearer token names (for requests, and for TokenReviews).
    pub fn user_for_token(&self, token: &str) -> Option<User> {
        let mut user = self.tokens.get(token)?.clone();
        if !user.groups.iter().any(|g| g == "system:authenticated") {
            user.groups.push("system:authenticated".into());
        }
        Some(user)
    }
}

/// The user a client certificate names: CN, and O as groups.
pub fn user_from_cert(der: &[u8]) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let mut groups: Vec<String> =
        subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
    groups.push("system:authenticated".into());
    Some(User { name, uid: String::new(), groups })
}

/// The reviews that ask about someone else: for masters and nodes only.
pub const ABOUT_OTHERS: [&str; 2] = ["subjectaccessreviews", "tokenreviews"];

/// Whether `user` may `verb` the object (`obj` is the object written, for pods bound to a node).
pub fn authorize(
    user: &User,
    verb: &str,
    r: &ResourceType,
    ns: Option<&str>,
    name: Option<&str>,
    sub: Option<&str>,
    obj: Option<&Value>,
) -> Result<(), ApiError> {
    if user.is_master() || matches!(verb, "get" | "list" | "watch") {
        return Ok(());
    }
    if !r.is_stored() && verb == "create" {
        // Asking about oneself is open to every authenticated user, as upstream's
        // system:basic-user role makes it; asking about others (SubjectAccessReview,
        // TokenReview) is for kubelets checking callers of their API, as upstream's system:node
        // role.
        if !ABOUT_OTHERS.contains(&r.name) || user.node().is_some() {
            return Ok(());
        }
    }
    let own = user.node().is_some_and(|node| match (r.group, r.name) {
        ("", "nodes") => {
            name == Some(node)
                || (verb == "create" && obj.is_some_and(|o| o["metadata"]["name"] == node))
        }
        ("coordination.k8s.io", "leases") => {
            ns == Some("kube-node-lease")
                && (name == Some(node) || obj.is_some_and(|o| o["metadata"]["name"] == node))
        }
        ("", "pods") => obj.is_some_and(|o| o["spec"]["nodeName"] == node) || sub == Some("status"),
        ("", "events") | ("events.k8s.io", "events") => verb == "create" || verb == "patch",
        _ => false,
    });
    if own {
        return Ok(());
    }
    let subject = match name {
        Some(n) => format!("{} {n:?}", r.qualified()),
        None => r.qualified(),
    };
    let resource = match sub {
        Some(s) => format!("{}/{s}", r.name),
        None => r.name.to_string(),
    };
    let scope = match ns {
        Some(ns) => format!(" in the namespace {ns:?}"),
        None => String::new(),
    };
    Err(ApiError::forbidden(format!(
        "{subject} is forbidden: User {:?} cannot {verb} resource {resource:?} in API group {:?}{scope}",
        user.name, r.group
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::find;

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
        std::fs::write(&f, "just-a-token\n").unwrap();
        assert!(Authenticator::from_token_file(&f).unwrap_err().to_string().contains(":1:"));
    }

    #[test]
    fn only_masters_write_anything_and_nodes_write_their_own() {
        let pods = find("", "v1", "pods").unwrap();
        let nodes = find("", "v1", "nodes").unwrap();
        let node = User {
            name: "system:node:n1".into(),
            uid: String::new(),
            groups: vec!["system:nodes".into()],
        };
        let alice = User { name: "alice".into(), uid: String::new(), groups: vec![] };
        let master = User {
            name: "admin".into(),
            uid: String::new(),
            groups: vec!["system:masters".into()],
        };
        assert!(authorize(&master, "delete", nodes, None, Some("n2"), None, None).is_ok());
        assert!(authorize(&alice, "list", pods, Some("default"), None, None, None).is_ok());
        let err = authorize(&alice, "create", pods, Some("default"), None, None, None).unwrap_err();
        assert_eq!(
            err.message,
            "pods is forbidden: User \"alice\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert!(authorize(&node, "update", nodes, None, Some("n1"), Some("status"), None).is_ok());
        assert!(authorize(&node, "update", nodes, None, Some("n2"), Some("status"), None).is_err());
        let mine = serde_json::json!({"spec": {"nodeName": "n1"}});
        assert!(
            authorize(&node, "delete", pods, Some("default"), Some("p"), None, Some(&mine)).is_ok()
        );
        let theirs = serde_json::json!({"spec": {"nodeName": "n2"}});
        assert!(
            authorize(&node, "delete", pods, Some("default"), Some("p"), None, Some(&theirs))
                .is_err()
        );
    }

    #[test]
    fn anyone_asks_about_themselves_and_only_nodes_and_masters_about_others() {
        let sar = find("authorization.k8s.io", "v1", "subjectaccessreviews").unwrap();
        let ssar = find("authorization.k8s.io", "v1", "selfsubjectaccessreviews").unwrap();
        let user = |name: &str, group: &str| User {
            name: name.into(),
            uid: String::new(),
            groups: vec![group.into()],
        };
        let (alice, node) = (user("alice", "devs"), user("system:node:n1", "system:nodes"));
        assert!(authorize(&alice, "create", ssar, None, None, None, None).is_ok());
        assert!(authorize(&alice, "create", sar, None, None, None, None).is_err());
        assert!(authorize(&node, "create", sar, None, None, None, None).is_ok());
        let tokens = find("authentication.k8s.io", "v1", "tokenreviews").unwrap();
        assert!(authorize(&alice, "create", tokens, None, None, None, None).is_err());
        assert!(authorize(&node, "create", tokens, None, None, None, None).is_ok());
        let admin = user("admin", "system:masters");
        assert!(authorize(&admin, "create", sar, None, None, None, None).is_ok());
    }
}
