//! Events, in both APIs: core `v1` and `events.k8s.io/v1`, selectable by the same fields (read
//! from each shape).

use super::Strategy;
use crate::objects;
use crate::selectors::Source::Str;
use crate::table::printers;

/// Core `v1` Events.
pub const STRATEGY: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::core::v1::Event>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::core::v1::Event>),
    fields: &[
        ("involvedObject.kind", Str("involvedObject.kind")),
        ("involvedObject.namespace", Str("involvedObject.namespace")),
        ("involvedObject.name", Str("involvedObject.name")),
        ("involvedObject.uid", Str("involvedObject.uid")),
        ("involvedObject.apiVersion", Str("involvedObject.apiVersion")),
        ("involvedObject.resourceVersion", Str("involvedObject.resourceVersion")),
        ("involvedObject.fieldPath", Str("involvedObject.fieldPath")),
        ("reason", Str("reason")),
        ("reportingComponent", Str("reportingComponent")),
        ("source", Str("source.component")),
        ("type", Str("type")),
    ],
    printer: printers::core_event,
    ..Strategy::PLAIN
};

/// `events.k8s.io/v1` Events: the same selectable fields, read from this shape.
pub const STRATEGY_V1: Strategy = Strategy {
    decode: objects::decode_typed::<k8s_openapi::api::events::v1::Event>,
    schema: Some(crate::openapi::schema_of::<k8s_openapi::api::events::v1::Event>),
    fields: &[
        ("involvedObject.kind", Str("regarding.kind")),
        ("involvedObject.namespace", Str("regarding.namespace")),
        ("involvedObject.name", Str("regarding.name")),
        ("involvedObject.uid", Str("regarding.uid")),
        ("involvedObject.apiVersion", Str("regarding.apiVersion")),
        ("involvedObject.resourceVersion", Str("regarding.resourceVersion")),
        ("involvedObject.fieldPath", Str("regarding.fieldPath")),
        ("reason", Str("reason")),
        ("reportingComponent", Str("reportingController")),
        ("source", Str("deprecatedSource.component")),
        ("type", Str("type")),
    ],
    printer: printers::events_v1_event,
    ..Strategy::PLAIN
};
