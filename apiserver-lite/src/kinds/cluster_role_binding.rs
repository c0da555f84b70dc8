//! ClusterRoleBindings: the RBAC group defaulted into `roleRef` and subjects, and a `roleRef`
//! that never changes.

use api::validation::ErrorList;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde_json::Value;

use super::Strategy;
use crate::errors::ApiError;
use crate::objects::{self, rbac, typed};
use crate::resources::ResourceType;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| {
        objects::decode_converted::<ClusterRoleBinding>(r, obj, rbac::default_cluster_role_binding)
    },
    schema: Some(crate::openapi::schema_of::<ClusterRoleBinding>),
    validate: |_, obj| Ok(rbac::validate_cluster_role_binding(&typed(obj)?)),
    validate_update,
    validate_status_update: validate_update,
    printer: printers::binding,
    ..Strategy::PLAIN
};

fn validate_update(_: &ResourceType, old: &Value, new: &Value) -> Result<ErrorList, ApiError> {
    let (n, o): (ClusterRoleBinding, ClusterRoleBinding) = (typed(new)?, typed(old)?);
    let mut errs = rbac::validate_cluster_role_binding(&n);
    errs.extend(rbac::validate_role_ref_update(&n.role_ref, &o.role_ref));
    Ok(errs)
}
