//! ControllerRevisions: metadata rules only. Stored as sent: they are not decoded as their
//! type (as before the strategies; their `data` is an arbitrary object).

use super::{Strategy, untyped};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: untyped,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::apps::v1::ControllerRevision>),
    printer: printers::controller_revision,
    ..Strategy::PLAIN
};
