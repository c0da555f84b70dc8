//! `events.k8s.io/v1` Event, as client-go's new event recorder (the kubelet's, the
//! scheduler's) writes it.

use k8s_pb::api::events::v1 as events;

use super::core::{event_source, object_reference};
use super::meta::{micro_time, object_meta, time};
use super::{R, done, nested, number, obj, plain, ptr};

pub(super) fn event(mut e: events::Event) -> R {
    let series = nested(e.series.take(), |mut s| {
        let v = obj([
            // Both required: Go writes them even when zero.
            ("count", ptr(s.count.take())),
            ("lastObservedTime", micro_time(s.last_observed_time.take())),
        ]);
        done(&s, "EventSeries")?;
        Ok(v)
    })?;
    let v = obj([
        ("metadata", object_meta(e.metadata.take())?),
        ("eventTime", micro_time(e.event_time.take())),
        ("series", series),
        ("reportingController", plain(e.reporting_controller.take())),
        ("reportingInstance", plain(e.reporting_instance.take())),
        ("action", plain(e.action.take())),
        ("reason", plain(e.reason.take())),
        ("regarding", nested(e.regarding.take(), object_reference)?),
        ("related", nested(e.related.take(), object_reference)?),
        ("note", plain(e.note.take())),
        ("type", plain(e.r#type.take())),
        ("deprecatedSource", nested(e.deprecated_source.take(), event_source)?),
        ("deprecatedFirstTimestamp", time(e.deprecated_first_timestamp.take())),
        ("deprecatedLastTimestamp", time(e.deprecated_last_timestamp.take())),
        ("deprecatedCount", number(e.deprecated_count.take())),
    ]);
    done(&e, "Event")?;
    Ok(v)
}
