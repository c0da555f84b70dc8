//! DaemonSets: upstream's defaults, template generation 1 on create and one more per template
//! change, their status rules.

use k8s_openapi::api::apps::v1::DaemonSet;

use super::Strategy;
use crate::objects::{self, apps, typed, with_typed};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| objects::decode_converted::<DaemonSet>(r, obj, apps::default_daemon_set),
    schema: Some(crate::openapi::schema_of::<DaemonSet>),
    prepare_for_create: |obj| with_typed(obj, apps::prepare_daemon_set_create),
    prepare_for_update: apps::bump_template_generation,
    validate: |_, obj| Ok(apps::validate_daemon_set(&typed(obj)?, None)),
    validate_update: |_, old, new| Ok(apps::validate_daemon_set(&typed(new)?, Some(&typed(old)?))),
    validate_status_update: |_, old, new| {
        Ok(apps::validate_daemon_set_status(&typed(new)?, &typed(old)?))
    },
    printer: printers::daemon_set,
    ..Strategy::PLAIN
};
