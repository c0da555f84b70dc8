//! Roles: their rules' validation.

use k8s_openapi::api::rbac::v1::Role;

use super::Strategy;
use crate::objects::{self, rbac, typed};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<Role>,
    schema: Some(crate::openapi::schema_of::<Role>),
    validate: |_, obj| Ok(rbac::validate_role(&typed(obj)?)),
    validate_update: |_, _, new| Ok(rbac::validate_role(&typed(new)?)),
    validate_status_update: |_, _, new| Ok(rbac::validate_role(&typed(new)?)),
    printer: printers::role,
    ..Strategy::PLAIN
};
