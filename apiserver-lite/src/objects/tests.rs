#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn uids_and_generated_names_look_like_upstreams() {
    for _ in 0..64 {
        let u = new_uid();
        let groups: Vec<usize> = u.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{u}");
        assert!(u.bytes().all(|c| c == b'-' || c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_eq!(&u[14..15], "4", "{u}");
        assert!("89ab".contains(&u[19..20]), "{u}");
    }
    let now = now_rfc3339();
    assert!(now.ends_with('Z') && now.parse::<jiff::Timestamp>().is_ok(), "{now}");
    assert_eq!(now.len(), "2026-11-28T20:00:00Z".len(), "whole seconds: {now}");
    let n = generate_name("web-");
    assert!(
        n.starts_with("web-") && n.len() == 9 && n[4..].bytes().all(|b| NAME_ALPHABET.contains(&b))
    );
}

#[test]
fn decoding_reports_type_errors_with_paths_and_unknown_fields() {
    let pods = &crate::resources::PODS;
    let bad =
        json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "eighty"}]}]}});
    let err = decode(pods, bad).unwrap_err();
    assert!(err.message.starts_with("Pod in version \"v1\" cannot be handled as a Pod: spec.containers[0].ports[0].containerPort"), "{}", err.message);
    let (_, unknown) =
        decode(pods, json!({"spec": {"containers": [{"name": "c", "comand": ["x"]}]}})).unwrap();
    assert_eq!(unknown, ["spec.containers[0].comand"]);
}

#[test]
fn create_sets_metadata_and_pod_status() {
    let pods = &crate::resources::PODS;
    let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}});
    prepare_create(pods, Some("default"), &mut obj).unwrap();
    let mut obj = decode(pods, obj).unwrap().0; // with the pod's defaults
    prepare_for_create(pods, &mut obj).unwrap();
    assert_eq!(obj["metadata"]["namespace"], "default");
    assert!(obj["metadata"]["name"].as_str().unwrap().starts_with("web-"));
    assert_eq!(obj["metadata"]["generation"], 1);
    assert_eq!(obj["status"]["phase"], "Pending");
    assert_eq!(obj["status"]["qosClass"], "BestEffort");
    assert_eq!(obj["spec"]["restartPolicy"], "Always");
    assert!(obj["spec"].get("serviceAccountName").is_none(), "admission names the account");
    let old_field = json!({"spec": {"serviceAccount": "robot", "containers": [{"name": "c"}]}});
    let old_field = decode(pods, old_field).unwrap().0;
    assert_eq!(old_field["spec"]["serviceAccountName"], "robot");
    let mut wrong = json!({"metadata": {"namespace": "other"}});
    assert_eq!(prepare_create(pods, Some("default"), &mut wrong).unwrap_err().code, 400);
}

#[test]
fn updates_keep_identity_separate_status_and_bump_generation_on_spec_changes() {
    let deploy = &crate::resources::DEPLOYMENTS;
    let old = json!({"metadata": {"name": "web", "uid": "u1", "generation": 3}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
    let mut new = json!({"metadata": {"name": "web", "uid": "forged"}, "spec": {"replicas": 2}, "status": {"replicas": 9}});
    prepare_update(deploy, None, &old, &mut new).unwrap();
    assert_eq!(
        (new["metadata"]["uid"].as_str(), new["metadata"]["generation"].as_i64()),
        (Some("u1"), Some(4))
    );
    assert_eq!(new["status"]["replicas"], 1, "the main resource cannot write status");
    let mut status_only = json!({"spec": {"replicas": 5}, "status": {"replicas": 2}});
    prepare_update(deploy, Some(crate::resources::Subresource::Status), &old, &mut status_only)
        .unwrap();
    assert_eq!(
        (status_only["spec"]["replicas"].as_i64(), status_only["status"]["replicas"].as_i64()),
        (Some(1), Some(2))
    );
    assert_eq!(status_only["metadata"]["generation"], 3, "a status write is no spec change");
}

#[test]
fn a_pod_spec_is_immutable_except_images() {
    let pods = &crate::resources::PODS;
    let pod = |image: &str, policy: &str| {
        let p = json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": image}], "restartPolicy": policy}});
        decode(pods, p).unwrap().0
    };
    let old = pod("x:1", "Always");
    let mut image = pod("x:2", "Always");
    prepare_update(pods, None, &old, &mut image).unwrap();
    validate_update(pods, None, &old, &image).unwrap();
    let mut policy = pod("x:1", "Never");
    prepare_update(pods, None, &old, &mut policy).unwrap();
    let err = validate_update(pods, None, &old, &policy).unwrap_err();
    assert_eq!(err.code, 422);
    assert!(
        err.message.starts_with(
            "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields"
        ),
        "{}",
        err.message
    );
}

#[test]
fn type_checks_fill_or_refuse_apiversion_and_kind() {
    let pods = &crate::resources::PODS;
    let mut bare = json!({"metadata": {"name": "p"}});
    check_type(pods, &mut bare).unwrap();
    assert_eq!((bare["apiVersion"].as_str(), bare["kind"].as_str()), (Some("v1"), Some("Pod")));
    let err = check_type(pods, &mut json!({"apiVersion": "apps/v1", "kind": "Pod"})).unwrap_err();
    assert_eq!(
        err.message,
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    );
}
