//! The review types, created to get an answer and never stored, as upstream:
//! `selfsubjectaccessreviews` (`kubectl auth can-i`), answered by the same authorizer that
//! guards every request; `subjectaccessreviews`, the same question about someone else (how a
//! kubelet in Webhook mode authorizes callers of its API); `selfsubjectrulesreviews`
//! (`kubectl auth can-i --list`), that authorizer's rules written out ([`rules`]); and
//! `selfsubjectreviews` (`kubectl auth whoami`), the caller's identity as authentication saw it;
//! and `tokenreviews`, whom a bearer token names (how a kubelet authenticates token callers).

mod rules;

use api::validation::{ErrorList, FieldError, Path};
use k8s_openapi::api::authentication::v1::{
    SelfSubjectReview, SelfSubjectReviewStatus, TokenReview, TokenReviewSpec, TokenReviewStatus,
    UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SubjectAccessReview, SubjectAccessReviewSpec,
    SubjectAccessReviewStatus,
};
use serde_json::Value;

use crate::auth::{self, Authenticator, User};
use crate::errors::ApiError;
use crate::objects::{self, FieldValidation};
use crate::registry::{self, Registry};
use crate::resources::{RESOURCES, ResourceType};

/// Why a request the interim authorizer refuses is refused, for `kubectl auth can-i` to print.
pub const DENIED: &str = "apiserver-lite's interim authorizer (until RBAC): system:masters may do anything, authenticated users may read and ask the reviews, a node may write only its own Node, Lease, pods and events and request tokens for its pods' service accounts";

/// A value rendered as-is in a field error (`null`, or a JSON document).
struct Raw(String);

impl api::validation::Value for Raw {
    fn render(&self) -> String {
        self.0.clone()
    }
}

/// Answers a review created by `user`: the object sent, with its `status` filled in, and the
/// unknown-field warnings `validation` asks for.
pub fn answer(
    registry: &Registry,
    authenticator: &Authenticator,
    user: &User,
    r: &ResourceType,
    mut body: Value,
    validation: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    objects::check_type(r, &mut body)?;
    let (decoded, unknown) = objects::decode(r, body)?;
    let warnings = registry::field_warnings(&unknown, validation)?;
    let stored = |t: &ResourceType, ns: Option<&str>, name: &str| registry.get(t, ns, name).ok();
    let answered = match r.kind {
        "SelfSubjectAccessReview" => {
            let mut review: SelfSubjectAccessReview = typed(decoded)?;
            validate(r, &review.spec, None)?;
            review.status = Some(decide(user, &review.spec, stored));
            serde_json::to_value(review)
        }
        "SubjectAccessReview" => {
            let mut review: SubjectAccessReview = typed(decoded)?;
            let (subject, asked) = subject_of(&review.spec);
            validate(r, &asked, Some(&subject))?;
            review.status = Some(decide(&subject, &asked, stored));
            serde_json::to_value(review)
        }
        "SelfSubjectRulesReview" => {
            let mut review: SelfSubjectRulesReview = typed(decoded)?;
            let namespace = review.spec.namespace.clone().unwrap_or_default();
            review.status = Some(rules::rules(user, &namespace));
            serde_json::to_value(review)
        }
        "TokenReview" => {
            let mut review: TokenReview = typed(decoded)?;
            review.status = Some(token_review(authenticator, &review.spec));
            serde_json::to_value(review)
        }
        "SelfSubjectReview" => {
            let mut review: SelfSubjectReview = typed(decoded)?;
            review.status = Some(SelfSubjectReviewStatus { user_info: Some(user_info(user)) });
            serde_json::to_value(review)
        }
        other => return Err(ApiError::internal(format!("{other} is not a review type"))),
    };
    let answered = answered.map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((answered, warnings))
}

/// Decoded values always fit their type; this only turns JSON back into it.
fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::internal(format!("decoded review: {e}")))
}

/// Upstream's checks of an access review: exactly one kind of attributes, and for a review of
/// someone else (`subject`), a user or a group.
fn validate(
    r: &ResourceType,
    spec: &SelfSubjectAccessReviewSpec,
    subject: Option<&User>,
) -> Result<(), ApiError> {
    let path = Path::root("spec");
    let mut errors = ErrorList::default();
    match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (None, None) => errors.push(FieldError::invalid(
            &path.child("resourceAttributes"),
            Raw("null".into()),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (Some(_), Some(nr)) => errors.push(FieldError::invalid(
            &path.child("nonResourceAttributes"),
            Raw(serde_json::to_string(nr).unwrap_or_default()),
            "cannot be specified in combination with resourceAttributes",
        )),
        _ => {}
    }
    if subject.is_some_and(|u| u.name.is_empty() && u.groups.is_empty()) {
        errors.push(FieldError::invalid(
            &path.child("user"),
            "",
            "at least one of user or group must be specified",
        ));
    }
    errors.into_result().map_err(|e| ApiError::invalid(r, "", &e))
}

/// Whom a SubjectAccessReview asks about, and what, in the terms [`decide`] takes.
fn subject_of(spec: &SubjectAccessReviewSpec) -> (User, SelfSubjectAccessReviewSpec) {
    let subject = User {
        name: spec.user.clone().unwrap_or_default(),
        uid: spec.uid.clone().unwrap_or_default(),
        groups: spec.groups.clone().unwrap_or_default(),
        extra: spec.extra.clone().unwrap_or_default(),
    };
    let asked = SelfSubjectAccessReviewSpec {
        resource_attributes: spec.resource_attributes.clone(),
        non_resource_attributes: spec.non_resource_attributes.clone(),
    };
    (subject, asked)
}

/// Whom a token names, by the same authenticator that checks requests, for the audiences
/// asked (the API's when none are), as upstream's TokenReview: the audiences answered are
/// those of the token among the ones asked. Tokens from the token file are not bound to
/// audiences, so the audiences asked for are the audiences answered.
fn token_review(authenticator: &Authenticator, spec: &TokenReviewSpec) -> TokenReviewStatus {
    let token = spec.token.as_deref().unwrap_or_default();
    let audiences = spec.audiences.as_deref().filter(|a| !a.is_empty());
    match authenticator.review(token, audiences, jiff::Timestamp::now().as_second()) {
        Ok(a) => TokenReviewStatus {
            authenticated: Some(true),
            user: Some(user_info(&a.user)),
            audiences: Some(a.audiences).filter(|a| !a.is_empty()),
            error: None,
        },
        Err(e) => TokenReviewStatus {
            authenticated: Some(false),
            error: Some(e.to_string()),
            ..Default::default()
        },
    }
}

fn user_info(user: &User) -> UserInfo {
    UserInfo {
        username: Some(user.name.clone()),
        uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
        groups: Some(user.groups.clone()),
        extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
    }
}

fn allowed(yes: bool) -> SubjectAccessReviewStatus {
    SubjectAccessReviewStatus {
        allowed: yes,
        reason: (!yes).then(|| DENIED.to_string()),
        ..Default::default()
    }
}

/// Whether `user` may do what the review asks, by the rules [`auth::authorize`] applies to real
/// requests. `stored` looks up the object a named request is about (a node's rights over a pod
/// depend on the node it is bound to).
pub fn decide(
    user: &User,
    spec: &SelfSubjectAccessReviewSpec,
    stored: impl Fn(&ResourceType, Option<&str>, &str) -> Option<Value>,
) -> SubjectAccessReviewStatus {
    if user.is_master() {
        return allowed(true);
    }
    let Some(a) = &spec.resource_attributes else {
        // Non-resource paths (discovery, version, health) are open to every authenticated
        // user for reading, as this server serves them.
        let verb = spec.non_resource_attributes.as_ref().and_then(|n| n.verb.as_deref());
        return allowed(verb == Some("get"));
    };
    let wildcard = |s: &Option<String>| s.as_deref() == Some("*");
    if wildcard(&a.verb) {
        return allowed(false);
    }
    if wildcard(&a.resource) || wildcard(&a.group) {
        // Every type at once: only reads are open to every authenticated user.
        return allowed(matches!(a.verb.as_deref(), Some("get" | "list" | "watch")));
    }
    let Some(t) = resource_type(a) else {
        let resource = a.resource.as_deref().unwrap_or_default();
        let group = a.group.as_deref().unwrap_or_default();
        return SubjectAccessReviewStatus {
            allowed: false,
            reason: Some(format!("this server does not serve {resource:?} in API group {group:?}")),
            ..Default::default()
        };
    };
    let some = |s: &Option<String>| s.clone().filter(|v| !v.is_empty());
    let (ns, name, sub) = (some(&a.namespace), some(&a.name), some(&a.subresource));
    let ns = ns.filter(|_| t.namespaced);
    let verb = a.verb.as_deref().unwrap_or_default();
    let obj = name.as_deref().and_then(|n| stored(t, ns.as_deref(), n));
    let decision = auth::authorize(
        user,
        verb,
        t,
        ns.as_deref(),
        name.as_deref(),
        sub.as_deref(),
        obj.as_ref(),
    );
    allowed(decision.is_ok())
}

/// The served type the attributes name (any version when none or `*` is given).
fn resource_type(a: &ResourceAttributes) -> Option<&'static ResourceType> {
    let group = a.group.as_deref().unwrap_or_default();
    let resource = a.resource.as_deref()?;
    let version = a.version.as_deref().filter(|v| !v.is_empty() && *v != "*");
    RESOURCES
        .iter()
        .find(|t| t.group == group && t.name == resource && version.is_none_or(|v| v == t.version))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::authorization::v1::NonResourceAttributes;
    use serde_json::json;

    use super::*;

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..User::default()
        }
    }

    fn ask(
        verb: &str,
        group: &str,
        resource: &str,
        ns: &str,
        name: &str,
    ) -> SelfSubjectAccessReviewSpec {
        SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            non_resource_attributes: None,
        }
    }

    /// The pod `web` is bound to node-a; nothing else is stored.
    fn stored(t: &ResourceType, _: Option<&str>, name: &str) -> Option<Value> {
        (t.name == "pods" && name == "web").then(|| json!({"spec": {"nodeName": "node-a"}}))
    }

    #[test]
    fn answers_follow_the_authorizer_that_guards_requests() {
        let admin = user("admin", &["system:masters", "system:authenticated"]);
        let dev = user("dev", &["system:authenticated"]);
        let node = user("system:node:node-a", &["system:nodes", "system:authenticated"]);
        let table = [
            (&admin, ask("delete", "", "pods", "default", ""), true),
            (&admin, ask("*", "*", "*", "", ""), true),
            (&admin, ask("create", "example.com", "widgets", "", ""), true),
            (&dev, ask("get", "", "pods", "default", ""), true),
            (&dev, ask("watch", "apps", "deployments", "", ""), true),
            (&dev, ask("create", "", "pods", "default", ""), false),
            (&dev, ask("*", "", "pods", "default", ""), false),
            (&dev, ask("get", "*", "*", "", ""), true),
            (&dev, ask("create", "authorization.k8s.io", "selfsubjectrulesreviews", "", ""), true),
            (&dev, ask("delete", "authorization.k8s.io", "selfsubjectrulesreviews", "", ""), false),
            (&node, ask("update", "*", "*", "", ""), false),
            (&node, ask("update", "", "nodes", "", "node-a"), true),
            (&node, ask("update", "", "nodes", "", "node-b"), false),
            (&node, ask("delete", "", "pods", "default", "web"), true),
            (&node, ask("delete", "", "pods", "default", "other"), false),
            (
                &node,
                ask("update", "coordination.k8s.io", "leases", "kube-node-lease", "node-a"),
                true,
            ),
            (&node, ask("create", "", "secrets", "default", ""), false),
        ];
        for (who, spec, want) in table {
            let got = decide(who, &spec, stored);
            assert_eq!(got.allowed, want, "{} {:?}", who.name, spec.resource_attributes);
            assert_eq!(got.reason.is_some(), !want, "a refusal says why");
        }
    }

    #[test]
    fn a_subject_access_review_asks_about_its_subject_as_a_kubelet_does() {
        let kubelet_asks = |user: &str, groups: &[&str], verb: &str, node: &str| {
            let spec = SubjectAccessReviewSpec {
                user: Some(user.into()),
                groups: Some(groups.iter().map(|g| g.to_string()).collect()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    version: Some("v1".into()),
                    resource: Some("nodes".into()),
                    subresource: Some("proxy".into()),
                    name: Some(node.into()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let (subject, asked) = subject_of(&spec);
            decide(&subject, &asked, stored).allowed
        };
        let masters = ["system:masters", "system:authenticated"];
        assert!(kubelet_asks("kube-apiserver-kubelet-client", &masters, "create", "node-a"));
        let nodes = ["system:nodes", "system:authenticated"];
        assert!(kubelet_asks("system:node:node-a", &nodes, "create", "node-a"));
        assert!(!kubelet_asks("system:node:node-b", &nodes, "create", "node-a"));
        assert!(kubelet_asks("system:node:node-b", &nodes, "get", "node-a"), "reads are open");
        assert!(!kubelet_asks("dev", &[], "create", "node-a"));
    }

    #[test]
    fn a_token_review_names_the_tokens_user_or_says_it_is_invalid() {
        let mut authn = Authenticator::default();
        authn.add_token("t0k3n", user("system:node:node-b", &["system:nodes"]));
        let ask = |token: &str| {
            let spec = TokenReviewSpec {
                token: Some(token.into()),
                audiences: Some(vec!["https://kubernetes.default.svc".into()]),
            };
            token_review(&authn, &spec)
        };
        let yes = ask("t0k3n");
        assert_eq!(yes.authenticated, Some(true));
        let who = yes.user.unwrap();
        assert_eq!(who.username.as_deref(), Some("system:node:node-b"));
        assert_eq!(who.groups.unwrap(), ["system:nodes", "system:authenticated"]);
        assert_eq!(yes.audiences.unwrap(), ["https://kubernetes.default.svc"]);
        for bad in ["nope", ""] {
            let no = ask(bad);
            assert_eq!(no.authenticated, Some(false), "{bad:?}");
            assert_eq!((no.user, no.error.as_deref()), (None, Some("invalid bearer token")));
        }
    }

    #[test]
    fn unknown_types_and_non_resource_paths_get_clear_answers() {
        let dev = user("dev", &["system:authenticated"]);
        let got = decide(&dev, &ask("get", "example.com", "widgets", "", ""), stored);
        assert!(!got.allowed);
        assert_eq!(
            got.reason.as_deref(),
            Some("this server does not serve \"widgets\" in API group \"example.com\"")
        );
        let path = |verb: &str| SelfSubjectAccessReviewSpec {
            resource_attributes: None,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/version".into()),
                verb: Some(verb.into()),
            }),
        };
        assert!(decide(&dev, &path("get"), stored).allowed);
        assert!(!decide(&dev, &path("post"), stored).allowed);
    }
}
