//! Namespaces: the `kubernetes` finalizer and the Active phase by default, a DNS label for a
//! name, termination (marked Terminating, emptied, then removed) instead of a plain delete.

use serde_json::json;

use super::{Deletion, Strategy};
use crate::objects::{self, set_default};
use crate::selectors::Source::Str;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::core::v1::Namespace>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::core::v1::Namespace>),
    defaults: |obj| {
        set_default(obj, &["spec", "finalizers"], json!(["kubernetes"]));
        set_default(obj, &["status", "phase"], json!("Active"));
        Ok(())
    },
    validate: |r, obj| Ok(objects::validate_meta_dns_label(r, obj)),
    validate_update: |r, _, new| Ok(objects::validate_meta_dns_label(r, new)),
    validate_status_update: |r, _, new| Ok(objects::validate_meta_dns_label(r, new)),
    fields: &[("status.phase", Str("status.phase"))],
    printer: printers::namespace,
    deletion: Deletion::Terminate,
    ..Strategy::PLAIN
};
