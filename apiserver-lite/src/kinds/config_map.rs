//! ConfigMaps: keys, size and immutability (the rules in [`crate::objects::config_map`]).

use k8s_openapi::api::core::v1::ConfigMap;

use super::Strategy;
use crate::objects::{self, config_map, typed, with_meta};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<ConfigMap>,
    schema: Some(crate::openapi::schema_of::<ConfigMap>),
    validate: |r, obj| Ok(with_meta(r, obj, config_map::validate(&typed(obj)?))),
    validate_update: |r, old, new| {
        Ok(with_meta(r, new, config_map::validate_update(&typed(new)?, &typed(old)?)))
    },
    validate_status_update: |r, old, new| {
        Ok(with_meta(r, new, config_map::validate_update(&typed(new)?, &typed(old)?)))
    },
    printer: printers::config_map,
    ..Strategy::PLAIN
};
