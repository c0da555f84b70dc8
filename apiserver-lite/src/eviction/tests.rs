#![allow(clippy::unwrap_used)]

use super::*;

fn eviction(body: Value) -> Eviction {
    decode(body, FieldValidation::Strict).unwrap().0
}

fn message(r: Result<impl std::fmt::Debug, ApiError>) -> (u16, String) {
    let e = r.unwrap_err();
    (e.code, e.message)
}

#[test]
fn an_eviction_of_either_version_decodes_and_its_kind_and_version_default() {
    for version in VERSIONS {
        let e = eviction(json!({"apiVersion": version, "kind": "Eviction",
                                "metadata": {"name": "p"}, "deleteOptions": {"gracePeriodSeconds": 5}}));
        assert_eq!(e.metadata.name.as_deref(), Some("p"));
        assert_eq!(e.delete_options.unwrap().grace_period_seconds, Some(5));
    }
    assert_eq!(eviction(json!({"metadata": {"name": "p"}})).metadata.name.as_deref(), Some("p"));
}

#[test]
fn a_body_that_is_no_eviction_is_refused_with_a_bad_request() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    assert_eq!(
        message(decode(pod, FieldValidation::Warn)),
        (400, "Pod in version \"v1\" cannot be handled as a Eviction: the kind in the data (Pod) does not match the expected kind of pods/eviction (Eviction)".into())
    );
    let wrong_version = json!({"apiVersion": "policy/v2", "kind": "Eviction"});
    assert_eq!(
        message(decode(wrong_version, FieldValidation::Warn)),
        (400, "Eviction in version \"v2\" cannot be handled as a Eviction: no kind \"Eviction\" is registered for version \"policy/v2\"".into())
    );
    let core = json!({"apiVersion": "v1", "kind": "Eviction"});
    assert_eq!(message(decode(core, FieldValidation::Warn)).0, 400);
    let (code, text) = message(decode(json!(["garbage"]), FieldValidation::Warn));
    assert_eq!(code, 400);
    assert!(text.contains("must be of type Eviction"), "{text}");
    let (code, text) = message(decode(json!({"metadata": {"name": 7}}), FieldValidation::Warn));
    assert_eq!(code, 400);
    assert!(
        text.starts_with(
            "Eviction in version \"v1\" cannot be handled as a Eviction: metadata.name"
        ),
        "{text}"
    );
}

#[test]
fn unknown_fields_are_warned_about_or_refused_as_field_validation_says() {
    let body = json!({"metadata": {"name": "p"}, "deleteOptions": {"grace": 1}});
    let (_, warnings) = decode(body.clone(), FieldValidation::Warn).unwrap();
    assert_eq!(warnings, ["unknown field \"deleteOptions.grace\""]);
    assert!(decode(body.clone(), FieldValidation::Ignore).unwrap().1.is_empty());
    assert_eq!(message(decode(body, FieldValidation::Strict)).0, 400);
}

#[test]
fn the_eviction_must_name_the_pod_of_the_url_in_its_namespace() {
    let mut e = eviction(json!({"metadata": {"name": "p"}}));
    check_target(&mut e, "d", "p").unwrap();
    assert_eq!(e.metadata.namespace.as_deref(), Some("d"), "the namespace is filled in");
    assert_eq!(
        message(check_target(&mut e, "d", "q")),
        (400, "name in URL does not match name in Eviction object".into())
    );
    let mut other = eviction(json!({"metadata": {"name": "p", "namespace": "e"}}));
    assert_eq!(
        message(check_target(&mut other, "d", "p")),
        (
            400,
            "the namespace of the provided object does not match the namespace sent on the request"
                .into()
        )
    );
    let mut unnamed = eviction(json!({"metadata": {}}));
    assert_eq!(message(check_target(&mut unnamed, "d", "p")).0, 400);
}

#[test]
fn the_requests_dry_run_reaches_the_options_unless_they_disagree() {
    let plain = eviction(json!({"metadata": {"name": "p"}}));
    assert_eq!(propagate_dry_run(&plain, true).unwrap().dry_run, Some(vec!["All".into()]));
    assert_eq!(propagate_dry_run(&plain, false).unwrap().dry_run, None);
    let own = eviction(json!({"metadata": {"name": "p"}, "deleteOptions": {"dryRun": ["All"]}}));
    assert_eq!(propagate_dry_run(&own, false).unwrap().dry_run, Some(vec!["All".into()]));
    assert_eq!(propagate_dry_run(&own, true).unwrap().dry_run, Some(vec!["All".into()]));
    let odd = eviction(json!({"metadata": {"name": "p"}, "deleteOptions": {"dryRun": ["Some"]}}));
    let e = propagate_dry_run(&odd, true).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (500, "Non-matching dry-run options in request and content: [All] and [Some]")
    );
}

fn pod(phase: &str, deleting: bool) -> Value {
    let mut p =
        json!({"metadata": {"name": "p", "resourceVersion": "42"}, "status": {"phase": phase}});
    if deleting {
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    p
}

#[test]
fn a_pending_pod_is_deleted_at_the_version_read_and_retried_on_conflicts() {
    let none = DeleteOptionsBody::default();
    let p = plan(&pod("Pending", false), &none).unwrap();
    assert_eq!(p.delete.precondition_resource_version.as_deref(), Some("42"));
    assert!(p.retry_conflicts);
    // The caller's own version is kept, and a conflict is then final.
    let own = DeleteOptionsBody {
        preconditions: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions {
            resource_version: Some("7".into()),
            uid: None,
        }),
        ..Default::default()
    };
    let p = plan(&pod("Pending", false), &own).unwrap();
    assert_eq!(p.delete.precondition_resource_version.as_deref(), Some("7"));
    assert!(!p.retry_conflicts);
}

#[test]
fn finished_and_deleting_pods_are_deleted_directly_and_running_ones_with_the_options_alone() {
    let options = DeleteOptionsBody { grace_period_seconds: Some(3), ..Default::default() };
    for (phase, deleting) in [("Succeeded", false), ("Failed", false), ("Running", true)] {
        let p = plan(&pod(phase, deleting), &options).unwrap();
        assert_eq!(p.delete.precondition_resource_version, None, "{phase}");
        assert_eq!(p.delete.grace_period_seconds, Some(3));
        assert!(p.retry_conflicts, "{phase}: deleted before any budget is looked at");
    }
    let p = plan(&pod("Running", false), &options).unwrap();
    assert_eq!(p.delete.precondition_resource_version, None);
    assert!(!p.retry_conflicts, "no budget is served: the delete is the eviction");
}

#[test]
fn delete_options_are_validated_as_a_deletes() {
    let bad = DeleteOptionsBody { dry_run: Some(vec!["Some".into()]), ..Default::default() };
    let e = plan(&pod("Running", false), &bad).unwrap_err();
    assert_eq!(e.code, 422, "{}", e.message);
    let dry = DeleteOptionsBody { dry_run: Some(vec!["All".into()]), ..Default::default() };
    assert!(plan(&pod("Running", false), &dry).unwrap().delete.dry_run);
}

#[test]
fn success_is_upstreams_created_status() {
    assert_eq!(success()["code"], 201);
    assert_eq!(success()["status"], "Success");
}
