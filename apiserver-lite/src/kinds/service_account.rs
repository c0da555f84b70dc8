//! ServiceAccounts: metadata rules only (their tokens are [`crate::serviceaccount`]'s).

use super::Strategy;
use crate::objects;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::core::v1::ServiceAccount>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::core::v1::ServiceAccount>),
    ..Strategy::PLAIN
};
