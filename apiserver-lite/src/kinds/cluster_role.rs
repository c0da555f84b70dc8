//! ClusterRoles: their rules' (and aggregation rule's) validation.

use k8s_openapi::api::rbac::v1::ClusterRole;

use super::Strategy;
use crate::objects::{self, rbac, typed};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<ClusterRole>,
    schema: Some(crate::openapi::schema_of::<ClusterRole>),
    validate: |_, obj| Ok(rbac::validate_cluster_role(&typed(obj)?)),
    validate_update: |_, _, new| Ok(rbac::validate_cluster_role(&typed(new)?)),
    validate_status_update: |_, _, new| Ok(rbac::validate_cluster_role(&typed(new)?)),
    printer: printers::role,
    ..Strategy::PLAIN
};
