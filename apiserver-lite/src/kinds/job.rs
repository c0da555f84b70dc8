//! Jobs: upstream's defaults, a generated selector on create, their status rules, orphaned
//! pods by default on delete (batch/v1's default), selectable by `status.successful`.

use k8s_openapi::api::batch::v1::Job;

use super::Strategy;
use crate::objects::{self, batch, typed, with_typed};
use crate::registry::Propagation;
use crate::selectors::Source::Int;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| objects::decode_converted::<Job>(r, obj, batch::default_job),
    schema: Some(crate::openapi::schema_of::<Job>),
    prepare_for_create: |obj| with_typed(obj, batch::prepare_job_create),
    validate: |_, obj| Ok(batch::validate_job(&typed(obj)?, None)),
    validate_update: |_, old, new| Ok(batch::validate_job(&typed(new)?, Some(&typed(old)?))),
    validate_status_update: |_, old, new| {
        Ok(batch::validate_job_status(&typed(new)?, &typed(old)?))
    },
    fields: &[("status.successful", Int("status.succeeded"))],
    printer: printers::job,
    default_propagation: Propagation::Orphan,
    ..Strategy::PLAIN
};
