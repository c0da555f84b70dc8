//! Leases: metadata rules only.

use super::Strategy;
use crate::objects;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::coordination::v1::Lease>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::coordination::v1::Lease>),
    printer: printers::lease,
    ..Strategy::PLAIN
};
