//! Services: type, session affinity and port defaults, a DNS label for a name, selectable by
//! cluster IP and type. (The cluster IP itself is allocated by the registry, which holds the
//! addresses in use.)

use super::Strategy;
use crate::objects::{self, core};
use crate::selectors::Source::Str;
use crate::table::printers;

pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::core::v1::Service>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::core::v1::Service>),
    defaults: |obj| {
        core::default_service(obj);
        Ok(())
    },
    validate: |r, obj| Ok(objects::validate_meta_dns_label(r, obj)),
    validate_update: |r, _, new| Ok(objects::validate_meta_dns_label(r, new)),
    validate_status_update: |r, _, new| Ok(objects::validate_meta_dns_label(r, new)),
    fields: &[("spec.clusterIP", Str("spec.clusterIP")), ("spec.type", Str("spec.type"))],
    printer: printers::service,
    ..Strategy::PLAIN
};
