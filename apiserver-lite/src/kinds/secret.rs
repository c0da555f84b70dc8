//! Secrets: `stringData` merged into `data` at decoding (so no rule, store or reader sees it),
//! the type's defaults, and types and immutability (the rules in [`crate::objects::secret`]).

use k8s_openapi::api::core::v1::Secret;

use super::Strategy;
use crate::objects::{self, secret, typed, with_meta};
use crate::selectors::Source::Str;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| {
        objects::decode_converted::<Secret>(r, obj, |s| {
            secret::merge_string_data(s);
            secret::default_secret(s);
        })
    },
    schema: Some(crate::openapi::schema_of::<Secret>),
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
