//! Nodes: metadata rules, selectable by `spec.unschedulable`.

use super::Strategy;
use crate::objects;
use crate::selectors::Source::Bool;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::core::v1::Node>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::core::v1::Node>),
    fields: &[("spec.unschedulable", Bool("spec.unschedulable"))],
    printer: printers::node,
    ..Strategy::PLAIN
};
