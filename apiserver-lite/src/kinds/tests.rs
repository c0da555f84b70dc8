//! The resource table is complete: every served type has a strategy that decodes as its type,
//! prints its rows, selects by its fields, and serves `scale` exactly when it has one.

use serde_json::json;

use crate::request::Verb;
use crate::resources::{Backing, CONTROLLER_REVISIONS, RESOURCES, Subresource};
use crate::selectors::FieldSelector;
use crate::table::printers;

#[test]
fn every_served_kind_decodes_as_its_type() {
    // Metrics are computed, never decoded from a body.
    for r in RESOURCES.iter().filter(|r| r.backing != Backing::Metrics) {
        let bad = json!({"apiVersion": r.group_version(), "kind": r.kind, "metadata": {"name": 5}});
        let decoded = (r.strategy.decode)(r, bad);
        if *r == CONTROLLER_REVISIONS {
            // Stored as sent, as before the strategies (see its room).
            assert!(decoded.is_ok(), "{}", r.qualified());
            continue;
        }
        let err = decoded.expect_err(&r.qualified());
        assert_eq!(err.code, 400, "{}: {err}", r.qualified());
        assert!(err.message.contains(&format!("cannot be handled as a {}", r.kind)), "{err}");
    }
}

#[test]
fn every_stored_kind_prints_a_table_row_and_selects_by_name_and_namespace() {
    let now = jiff::Timestamp::UNIX_EPOCH;
    for r in RESOURCES.iter().filter(|r| r.is_stored()) {
        let obj = json!({"metadata": {"name": "a", "namespace": "b"}});
        let row = (r.strategy.printer)(&obj, now);
        let named = row.iter().any(|(c, v)| c.name == "Name" && *v == json!("a"));
        assert!(named, "{}: a Name column with the object's name", r.qualified());
        let columns: Vec<_> = printers::columns(r.strategy.printer);
        assert_eq!(columns, row.iter().map(|(c, _)| *c).collect::<Vec<_>>(), "{}", r.name);

        let by_meta = FieldSelector::parse("metadata.name=a,metadata.namespace=b", r).unwrap();
        assert!(by_meta.matches(&obj), "{}", r.qualified());
        for (field, _) in r.strategy.fields {
            assert!(FieldSelector::parse(&format!("{field}=x"), r).is_ok(), "{field}");
        }
        let err = FieldSelector::parse("spec.nothing=x", r).unwrap_err();
        assert_eq!(err.message, "field label not supported: spec.nothing");
    }
}

#[test]
fn scale_is_served_exactly_for_the_kinds_whose_strategy_has_one() {
    for r in RESOURCES {
        assert_eq!(
            r.has_subresource(Subresource::Scale),
            r.strategy.scale.is_some(),
            "{}",
            r.qualified()
        );
    }
}

#[test]
fn only_stored_kinds_are_served_beyond_create_or_metrics_reads() {
    for r in RESOURCES.iter().filter(|r| !r.is_stored()) {
        let verbs: &[Verb] = match r.backing {
            Backing::Metrics => &[Verb::Get, Verb::List],
            _ => &[Verb::Create],
        };
        assert_eq!(r.verbs, verbs, "{}", r.qualified());
        assert!(r.subresources.is_empty() && r.strategy.scale.is_none(), "{}", r.qualified());
    }
}
