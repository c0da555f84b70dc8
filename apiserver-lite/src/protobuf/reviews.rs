//! The reviews (`authorization.k8s.io/v1` access and rules reviews, `authentication.k8s.io/v1`
//! TokenReview and SelfSubjectReview) and `kubectl create token`'s TokenRequest. A review's
//! status is the server's answer, so what a client sends there is not read.

use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use serde_json::Value;

use super::meta::object_meta;
use super::{R, done, list, nested, obj, plain, ptr, strings};

use std::mem::take;

/// `kubectl auth can-i`'s question.
pub(super) fn self_subject_access_review(mut r: authz::SelfSubjectAccessReview) -> R {
    let spec = nested(r.spec.take(), |mut s| {
        let v = obj([
            ("resourceAttributes", nested(s.resource_attributes.take(), resource_attributes)?),
            (
                "nonResourceAttributes",
                nested(s.non_resource_attributes.take(), non_resource_attributes)?,
            ),
        ]);
        done(&s, "SelfSubjectAccessReviewSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
    r.status = None;
    done(&r, "SelfSubjectAccessReview")?;
    Ok(v)
}

/// A question about another user, as a webhook authorizer's client or an aggregated server
/// asks it.
pub(super) fn subject_access_review(mut r: authz::SubjectAccessReview) -> R {
    let spec = nested(r.spec.take(), |mut s| {
        let extra = if s.extra.is_empty() {
            Value::Null
        } else {
            Value::Object(
                take(&mut s.extra)
                    .into_iter()
                    .map(|(k, mut e)| {
                        let v = Value::from(take(&mut e.items));
                        done(&e, "ExtraValue")?;
                        Ok((k, v))
                    })
                    .collect::<R<_>>()?,
            )
        };
        let v = obj([
            ("resourceAttributes", nested(s.resource_attributes.take(), resource_attributes)?),
            (
                "nonResourceAttributes",
                nested(s.non_resource_attributes.take(), non_resource_attributes)?,
            ),
            ("user", plain(s.user.take())),
            ("groups", strings(take(&mut s.groups))),
            ("extra", extra),
            ("uid", plain(s.uid.take())),
        ]);
        done(&s, "SubjectAccessReviewSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
    r.status = None;
    done(&r, "SubjectAccessReview")?;
    Ok(v)
}

fn resource_attributes(mut a: authz::ResourceAttributes) -> R {
    let field_selector = nested(a.field_selector.take(), |mut f| {
        let requirements = list(take(&mut f.requirements), |mut q| {
            let v = obj([
                ("key", plain(q.key.take())),
                ("operator", plain(q.operator.take())),
                ("values", strings(take(&mut q.values))),
            ]);
            done(&q, "FieldSelectorRequirement")?;
            Ok(v)
        })?;
        let v =
            obj([("rawSelector", plain(f.raw_selector.take())), ("requirements", requirements)]);
        done(&f, "FieldSelectorAttributes")?;
        Ok(v)
    })?;
    let label_selector = nested(a.label_selector.take(), |mut l| {
        let requirements = list(take(&mut l.requirements), |mut q| {
            let v = obj([
                ("key", plain(q.key.take())),
                ("operator", plain(q.operator.take())),
                ("values", strings(take(&mut q.values))),
            ]);
            done(&q, "LabelSelectorRequirement")?;
            Ok(v)
        })?;
        let v =
            obj([("rawSelector", plain(l.raw_selector.take())), ("requirements", requirements)]);
        done(&l, "LabelSelectorAttributes")?;
        Ok(v)
    })?;
    let v = obj([
        ("namespace", plain(a.namespace.take())),
        ("verb", plain(a.verb.take())),
        ("group", plain(a.group.take())),
        ("version", plain(a.version.take())),
        ("resource", plain(a.resource.take())),
        ("subresource", plain(a.subresource.take())),
        ("name", plain(a.name.take())),
        ("fieldSelector", field_selector),
        ("labelSelector", label_selector),
    ]);
    done(&a, "ResourceAttributes")?;
    Ok(v)
}

fn non_resource_attributes(mut n: authz::NonResourceAttributes) -> R {
    let v = obj([("path", plain(n.path.take())), ("verb", plain(n.verb.take()))]);
    done(&n, "NonResourceAttributes")?;
    Ok(v)
}

/// `kubectl auth can-i --list`'s question.
pub(super) fn self_subject_rules_review(mut r: authz::SelfSubjectRulesReview) -> R {
    let spec = nested(r.spec.take(), |mut s| {
        let v = obj([("namespace", plain(s.namespace.take()))]);
        done(&s, "SelfSubjectRulesReviewSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
    r.status = None;
    done(&r, "SelfSubjectRulesReview")?;
    Ok(v)
}

/// `kubectl auth whoami`'s question.
pub(super) fn self_subject_review(mut r: authn::SelfSubjectReview) -> R {
    let v = obj([("metadata", object_meta(r.metadata.take())?)]);
    r.status = None;
    done(&r, "SelfSubjectReview")?;
    Ok(v)
}

/// A token to check, as a webhook token authenticator's client sends it.
pub(super) fn token_review(mut r: authn::TokenReview) -> R {
    let spec = nested(r.spec.take(), |mut s| {
        let v =
            obj([("token", plain(s.token.take())), ("audiences", strings(take(&mut s.audiences)))]);
        done(&s, "TokenReviewSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
    r.status = None;
    done(&r, "TokenReview")?;
    Ok(v)
}

/// `kubectl create token`'s request.
pub(super) fn token_request(mut r: authn::TokenRequest) -> R {
    let spec = nested(r.spec.take(), |mut s| {
        let bound = nested(s.bound_object_ref.take(), |mut b| {
            let v = obj([
                ("kind", plain(b.kind.take())),
                ("apiVersion", plain(b.api_version.take())),
                ("name", plain(b.name.take())),
                ("uid", plain(b.u_id.take())),
            ]);
            done(&b, "BoundObjectReference")?;
            Ok(v)
        })?;
        let v = obj([
            ("audiences", strings(take(&mut s.audiences))),
            ("expirationSeconds", ptr(s.expiration_seconds.take())),
            ("boundObjectRef", bound),
        ]);
        done(&s, "TokenRequestSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
    r.status = None;
    done(&r, "TokenRequest")?;
    Ok(v)
}
