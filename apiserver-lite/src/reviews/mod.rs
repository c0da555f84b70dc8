//! The review types, created to get an answer and never stored, as upstream:
//! `selfsubjectaccessreviews` (`kubectl auth can-i`), answered by the same authorizer chain that
//! guards every request; `subjectaccessreviews`, the same question about someone else (how a
//! kubelet in Webhook mode authorizes callers of its API); `selfsubjectrulesreviews`
//! (`kubectl auth can-i --list`), the chain's rules written out; and
//! `selfsubjectreviews` (`kubectl auth whoami`), the caller's identity as authentication saw it;
//! and `tokenreviews`, whom a bearer token names (how a kubelet authenticates token callers).

use api::validation::{ErrorList, FieldError, Path};
use k8s_openapi::api::authentication::v1::{
    SelfSubjectReview, SelfSubjectReviewStatus, TokenReview, TokenReviewSpec, TokenReviewStatus,
    UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes as ResourceAttributes_, SelfSubjectAccessReview,
    SelfSubjectAccessReviewSpec, SelfSubjectRulesReview, SubjectAccessReview,
    SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use serde_json::Value;

use crate::auth::authorizer::{Attributes, Decision, ResourceAttributes, Target};
use crate::auth::{Authenticator, Authorizer, User};
use crate::errors::ApiError;
use crate::objects::{self, FieldValidation};
use crate::registry;
use crate::resources::ResourceType;

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
    authenticator: &Authenticator,
    authz: &Authorizer,
    user: &User,
    r: &ResourceType,
    mut body: Value,
    validation: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    objects::check_type(r, &mut body)?;
    let (decoded, unknown) = objects::decode(r, body)?;
    let warnings = registry::field_warnings(&unknown, validation)?;
    let answered = match r.kind {
        "SelfSubjectAccessReview" => {
            let mut review: SelfSubjectAccessReview = typed(decoded)?;
            validate(r, &review.spec, None)?;
            review.status = Some(decide(authz, user, &review.spec));
            serde_json::to_value(review)
        }
        "SubjectAccessReview" => {
            let mut review: SubjectAccessReview = typed(decoded)?;
            let (subject, asked) = subject_of(&review.spec);
            validate(r, &asked, Some(&subject))?;
            review.status = Some(decide(authz, &subject, &asked));
            serde_json::to_value(review)
        }
        "SelfSubjectRulesReview" => {
            let mut review: SelfSubjectRulesReview = typed(decoded)?;
            let namespace = review.spec.namespace.clone().unwrap_or_default();
            review.status = Some(authz.rules_for(user, &namespace));
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

/// Whether `user` may do what the review asks, by the chain that guards real requests.
pub fn decide(
    authz: &Authorizer,
    user: &User,
    spec: &SelfSubjectAccessReviewSpec,
) -> SubjectAccessReviewStatus {
    let selector = spec.resource_attributes.as_ref().map(field_selector).unwrap_or_default();
    let (verb, target) = match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(a), _) => {
            let attrs = ResourceAttributes {
                group: s(&a.group),
                resource: s(&a.resource),
                subresource: s(&a.subresource),
                namespace: s(&a.namespace),
                name: s(&a.name),
                field_selector: &selector,
            };
            (s(&a.verb), Target::Resource(attrs))
        }
        (None, Some(n)) => (s(&n.verb), Target::Path(s(&n.path))),
        (None, None) => ("", Target::Path("")),
    };
    let decision = authz.decide(&Attributes { user, verb, target });
    let reason = Some(decision.reason().to_string()).filter(|r| !r.is_empty());
    SubjectAccessReviewStatus {
        allowed: decision.allowed(),
        denied: matches!(decision, Decision::Deny(_)).then_some(true),
        reason,
        evaluation_error: None,
    }
}

fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or_default()
}

/// A review's field selector as one raw selector: `rawSelector`, else its requirements (an
/// `In` with one value is an equality; others select no single value and are left out).
fn field_selector(a: &ResourceAttributes_) -> String {
    let Some(f) = &a.field_selector else { return String::new() };
    if let Some(raw) = f.raw_selector.as_ref().filter(|r| !r.is_empty()) {
        return raw.clone();
    }
    let terms: Vec<String> = f
        .requirements
        .iter()
        .flatten()
        .filter_map(|r| match (r.operator.as_str(), r.values.as_deref()) {
            ("In", Some([v])) => Some(format!("{}={v}", r.key)),
            _ => None,
        })
        .collect();
    terms.join(",")
}

#[cfg(test)]
mod tests;
