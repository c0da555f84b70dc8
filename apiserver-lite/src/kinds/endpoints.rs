//! Endpoints: metadata rules only.

use super::Strategy;
use crate::objects;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::core::v1::Endpoints>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::core::v1::Endpoints>),
    ..Strategy::PLAIN
};
