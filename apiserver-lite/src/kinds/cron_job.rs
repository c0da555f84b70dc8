//! CronJobs: upstream's defaults, no status from a create, a status any update may write.

use api::validation::ErrorList;
use k8s_openapi::api::batch::v1::CronJob;
use serde_json::json;

use super::Strategy;
use crate::objects::{self, batch, typed};
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: |r, obj| objects::decode_converted::<CronJob>(r, obj, batch::default_cron_job),
    schema: Some(crate::openapi::schema_of::<CronJob>),
    prepare_for_create: |obj| {
        obj["status"] = json!({});
        Ok(())
    },
    validate: |_, obj| Ok(batch::validate_cron_job(&typed(obj)?, None)),
    validate_update: |_, old, new| Ok(batch::validate_cron_job(&typed(new)?, Some(&typed(old)?))),
    validate_status_update: |_, _, _| Ok(ErrorList::default()),
    printer: printers::cron_job,
    ..Strategy::PLAIN
};
