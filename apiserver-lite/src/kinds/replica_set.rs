//! ReplicaSets: upstream's defaults, no status from a create, their status rules, the Scale,
//! selectable by `status.replicas`.

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::json;

use super::{Strategy, scale};
use crate::objects::{self, apps, typed};
use crate::selectors::Source::Int;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| objects::decode_converted::<ReplicaSet>(r, obj, apps::default_replica_set),
    schema: Some(crate::openapi::schema_of::<ReplicaSet>),
    prepare_for_create: |obj| {
        obj["status"] = json!({});
        Ok(())
    },
    validate: |_, obj| Ok(apps::validate_replica_set(&typed(obj)?, None)),
    validate_update: |_, old, new| Ok(apps::validate_replica_set(&typed(new)?, Some(&typed(old)?))),
    validate_status_update: |_, _, new| Ok(apps::validate_replica_set_status(&typed(new)?)),
    fields: &[("status.replicas", Int("status.replicas"))],
    printer: printers::replica_set,
    scale: Some(scale::REPLICAS),
    ..Strategy::PLAIN
};
