//! Deployments: upstream's defaults, no status from a create, annotations that count as spec
//! (they are copied to the ReplicaSets), their own status rules, and the Scale.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;

use super::{Strategy, scale};
use crate::objects::{self, apps, typed};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| objects::decode_converted::<Deployment>(r, obj, apps::default_deployment),
    schema: Some(crate::openapi::schema_of::<Deployment>),
    prepare_for_create: |obj| {
        obj["status"] = json!({});
        Ok(())
    },
    annotations_are_spec: true,
    validate: |_, obj| Ok(apps::validate_deployment(&typed(obj)?, None)),
    validate_update: |_, old, new| Ok(apps::validate_deployment(&typed(new)?, Some(&typed(old)?))),
    validate_status_update: |_, old, new| {
        Ok(apps::validate_deployment_status(&typed(new)?, &typed(old)?))
    },
    printer: printers::deployment,
    scale: Some(scale::REPLICAS),
    ..Strategy::PLAIN
};
