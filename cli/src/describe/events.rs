//! The events about an object, as kubectl finds them (a list of `events` with a field
//! selector on `involvedObject` name, namespace, kind and UID) and prints them: a table of
//! type, reason, age (`4m22s (x3 over 10m)` for repeated events), source and message,
//! oldest last seen first.

use serde_json::Value;

use super::writer::{LEVEL_0, LEVEL_1, PrefixWriter};
use super::{Clock, fields, int, s};
use crate::builder::encode;
use crate::errors::Result;
use crate::factory::Factory;

/// What the events are about (`GetFieldSelector`'s arguments).
#[derive(Debug, Clone, Default)]
pub struct Involved<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// kubectl leaves the kind out for pods.
    pub kind: Option<&'a str>,
    pub uid: Option<&'a str>,
}

impl<'a> Involved<'a> {
    /// An object's reference, as `reference.GetReference` makes it.
    pub fn of(obj: &'a Value) -> Involved<'a> {
        let kind = s(obj, "/kind");
        let uid = s(obj, "/metadata/uid");
        Involved {
            namespace: s(obj, "/metadata/namespace"),
            name: s(obj, "/metadata/name"),
            kind: (!kind.is_empty()).then_some(kind),
            uid: (!uid.is_empty()).then_some(uid),
        }
    }

    /// The field selector, its terms sorted by field as `fields.Set` prints them.
    pub fn field_selector(&self) -> String {
        let mut terms = Vec::new();
        if let Some(k) = self.kind {
            terms.push(format!("involvedObject.kind={k}"));
        }
        terms.push(format!("involvedObject.name={}", self.name));
        terms.push(format!("involvedObject.namespace={}", self.namespace));
        if let Some(u) = self.uid {
            terms.push(format!("involvedObject.uid={u}"));
        }
        terms.join(",")
    }
}

/// The events about an object, every page.
pub async fn search(f: &Factory, who: &Involved<'_>, chunk_size: i64) -> Result<Vec<Value>> {
    let base = if who.namespace.is_empty() {
        "/api/v1/events".to_string()
    } else {
        format!("/api/v1/namespaces/{}/events", who.namespace)
    };
    let url = format!("{base}?fieldSelector={}", encode(&who.field_selector()));
    super::list_all(f, &url, chunk_size).await
}

/// kubectl's `DescribeEvents`.
pub fn describe_events(w: &mut PrefixWriter, events: &[Value], clock: &Clock) {
    if events.is_empty() {
        w.write(LEVEL_0, "Events:\t<none>\n");
        return;
    }
    w.flush();
    let mut sorted: Vec<&Value> = events.iter().collect();
    sorted.sort_by_key(|e| {
        s(e, "/lastTimestamp").parse::<jiff::Timestamp>().ok().unwrap_or(jiff::Timestamp::MIN)
    });
    w.write(LEVEL_0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
    w.write(LEVEL_1, "----\t------\t----\t----\t-------\n");
    for e in sorted {
        let event_time = e.get("eventTime").filter(|t| t.as_str().is_some_and(|t| !t.is_empty()));
        let first = match event_time {
            Some(t) => fields::age(clock, Some(t)),
            None => fields::age(clock, e.get("firstTimestamp")),
        };
        let count = int(e, "/count");
        let interval = if e.get("series").is_some_and(|x| !x.is_null()) {
            format!(
                "{} (x{} over {first})",
                fields::age(clock, e.pointer("/series/lastObservedTime")),
                int(e, "/series/count")
            )
        } else if count > 1 {
            format!("{} (x{count} over {first})", fields::age(clock, e.get("lastTimestamp")))
        } else {
            first
        };
        let mut source = s(e, "/source/component");
        if source.is_empty() {
            source = s(e, "/reportingController");
        }
        let mut message = s(e, "/message").trim().to_string();
        let path = s(e, "/involvedObject/fieldPath");
        if !path.is_empty() {
            message = format!("{path}: {message}");
        }
        w.write(
            LEVEL_1,
            &format!("{}\t{}\t{interval}\t{source}\t{message}\n", s(e, "/type"), s(e, "/reason")),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_field_selector_names_the_object_as_kubectl_does() {
        let who = Involved { namespace: "default", name: "web", kind: None, uid: Some("u1") };
        assert_eq!(
            who.field_selector(),
            "involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid=u1"
        );
        let node = json!({"kind": "Node", "metadata": {"name": "n1", "uid": "u2"}});
        assert_eq!(
            Involved::of(&node).field_selector(),
            "involvedObject.kind=Node,involvedObject.name=n1,involvedObject.namespace=,involvedObject.uid=u2"
        );
    }

    #[test]
    fn events_print_oldest_first_with_repeats_counted() {
        let clock =
            Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC };
        let events = [
            json!({"type": "Warning", "reason": "BackOff", "count": 3,
                   "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:05:38Z",
                   "source": {"component": "kubelet"}, "message": "Back-off restarting\n",
                   "involvedObject": {"fieldPath": "spec.containers{web}"}}),
            json!({"type": "Normal", "reason": "Scheduled", "eventTime": "2024-01-01T00:00:00.000000Z",
                   "reportingController": "default-scheduler", "message": "Assigned"}),
        ];
        let mut w = PrefixWriter::new();
        w.write(LEVEL_0, "Name:\tx\n");
        describe_events(&mut w, &events, &clock);
        assert_eq!(
            w.finish(),
            "Name:  x\nEvents:\n  Type     Reason     Age                  From               Message\n  ----     ------     ----                 ----               -------\n  Normal   Scheduled  10m                  default-scheduler  Assigned\n  Warning  BackOff    4m22s (x3 over 10m)  kubelet            spec.containers{web}: Back-off restarting\n"
        );
    }
}
