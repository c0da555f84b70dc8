//! Secrets: `stringData` merged into `data` at decoding (so no rule, store or reader sees it),
//! the type's defaults, and types and immutability (the rules in [`crate::objects::secret`]).

use k8s_openapi::api::core::v1::Secret;

use super::Strategy;
use crate::objects::{self, secret, typed, with_meta, with_typed};
use crate::selectors::Source::Str;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| objects::decode_converted::<Secret>(r, obj, secret::merge_string_data),
    schema: Some(crate::openapi::schema_of::<Secret>),
    defaults: |obj| with_typed(obj, secret::default_secret),
    validate: |r, obj| Ok(with_meta(r, obj, secret::validate(&typed(obj)?))),
    validate_update: |r, old, new| {
        Ok(with_meta(r, new, secret::validate_update(&typed(new)?, &typed(old)?)))
    },
    validate_status_update: |r, old, new| {
        Ok(with_meta(r, new, secret::validate_update(&typed(new)?, &typed(old)?)))
    },
    fields: &[("type", Str("type"))],
    printer: printers::secret,
    ..Strategy::PLAIN
};
