//! The review kinds (access, rules, token and self-subject reviews): decoded as their type,
//! answered by [`crate::reviews`], never stored.

use k8s_openapi::api::authentication::v1 as authn;
use k8s_openapi::api::authorization::v1 as authz;

use super::Strategy;
use crate::objects;

pub const SELF_SUBJECT_ACCESS_REVIEW: Strategy = Strategy {
    decode: objects::decode_typed::<authz::SelfSubjectAccessReview>,
    schema: Some(crate::openapi::schema_of::<authz::SelfSubjectAccessReview>),
    ..Strategy::PLAIN
};

pub const SUBJECT_ACCESS_REVIEW: Strategy = Strategy {
    decode: objects::decode_typed::<authz::SubjectAccessReview>,
    schema: Some(crate::openapi::schema_of::<authz::SubjectAccessReview>),
    ..Strategy::PLAIN
};

pub const SELF_SUBJECT_RULES_REVIEW: Strategy = Strategy {
    decode: objects::decode_typed::<authz::SelfSubjectRulesReview>,
    schema: Some(crate::openapi::schema_of::<authz::SelfSubjectRulesReview>),
    ..Strategy::PLAIN
};

pub const TOKEN_REVIEW: Strategy = Strategy {
    decode: objects::decode_typed::<authn::TokenReview>,
    schema: Some(crate::openapi::schema_of::<authn::TokenReview>),
    ..Strategy::PLAIN
};

pub const SELF_SUBJECT_REVIEW: Strategy = Strategy {
    decode: objects::decode_typed::<authn::SelfSubjectReview>,
    schema: Some(crate::openapi::schema_of::<authn::SelfSubjectReview>),
    ..Strategy::PLAIN
};
