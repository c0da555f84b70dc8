//! Server-side apply with the real kubectl v1.35 and kube-rs against apiserver-lite: `kubectl
//! apply --server-side` creates, updates, reports a conflict with another field manager and
//! takes ownership with `--force-conflicts`, with `managedFields` as upstream shows them;
//! `kubectl diff` shows a pending change; an object applied client-side moves to server-side
//! apply without conflicts; kube-rs `Patch::Apply` works.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use e2e::apiserver::{ApiServer, KubectlRun as Run};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

fn k(server: &ApiServer, args: &[&str]) -> Run {
    server.kubectl_run(args).unwrap()
}

fn ok(server: &ApiServer, args: &[&str]) -> String {
    let r = k(server, args);
    assert!(
        r.ok,
        "kubectl {args:?} failed:\n{}\n{}\napiserver log:\n{}",
        r.out,
        r.err,
        server.log_tail(15)
    );
    r.out
}

fn deployment(replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: {image}
"
    )
}

/// The live object with its managedFields, as `kubectl get -o json --show-managed-fields`.
fn live(server: &ApiServer, what: &str) -> Value {
    serde_json::from_str(&ok(server, &["get", what, "-o", "json", "--show-managed-fields"]))
        .unwrap()
}

fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    let entries = obj["metadata"]["managedFields"].as_array().unwrap();
    entries
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or_else(|| panic!("no {manager} in {entries:?}"))
}

#[test]
fn kubectl_apply_server_side_creates_updates_conflicts_and_forces() {
    let server = ApiServer::start().unwrap();
    let file = server.dir().join("web.yaml");
    let path = file.to_str().unwrap();

    std::fs::write(&file, deployment(2, "nginx:1")).unwrap();
    assert_eq!(
        ok(&server, &["apply", "--server-side", "-f", path]),
        "deployment.apps/web serverside-applied\n"
    );
    let obj = live(&server, "deployment/web");
    let mine = entry(&obj, "kubectl");
    assert_eq!(
        (mine["operation"].as_str(), mine["apiVersion"].as_str(), mine["fieldsType"].as_str()),
        (Some("Apply"), Some("apps/v1"), Some("FieldsV1"))
    );
    assert!(mine["time"].is_string());
    let fields = &mine["fieldsV1"];
    assert_eq!(fields["f:metadata"]["f:labels"]["f:app"], json!({}));
    assert_eq!(fields["f:spec"]["f:replicas"], json!({}));
    assert_eq!(fields["f:spec"]["f:selector"], json!({}));
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"],
        json!({".": {}, "f:image": {}, "f:name": {}})
    );
    let yaml = ok(&server, &["get", "deployment/web", "-o", "yaml", "--show-managed-fields"]);
    assert!(yaml.contains("manager: kubectl\n    operation: Apply"), "{yaml}");
    assert!(
        !ok(&server, &["get", "deployment/web", "-o", "yaml"]).contains("managedFields"),
        "hidden by default"
    );

    // An update.
    std::fs::write(&file, deployment(2, "nginx:2")).unwrap();
    assert_eq!(
        ok(&server, &["apply", "--server-side", "-f", path]),
        "deployment.apps/web serverside-applied\n"
    );
    assert_eq!(
        live(&server, "deployment/web")["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );

    // Another field manager changing replicas: a conflict, in upstream's words.
    std::fs::write(&file, deployment(5, "nginx:2")).unwrap();
    let r = k(&server, &["apply", "--server-side", "--field-manager=ops", "-f", path]);
    assert!(!r.ok);
    assert!(
        r.err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#),
        "{}",
        r.err
    );
    assert_eq!(live(&server, "deployment/web")["spec"]["replicas"], 2);

    // --force-conflicts takes ownership.
    let out = ok(
        &server,
        &["apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", path],
    );
    assert_eq!(out, "deployment.apps/web serverside-applied\n");
    let obj = live(&server, "deployment/web");
    assert_eq!(obj["spec"]["replicas"], 5);
    assert_eq!(entry(&obj, "ops")["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
    assert!(entry(&obj, "kubectl")["fieldsV1"]["f:spec"].get("f:replicas").is_none());

    // kubectl diff, client- and server-side, shows a pending change and changes nothing.
    std::fs::write(&file, deployment(5, "nginx:3")).unwrap();
    let server_side = ["diff", "--server-side", "--force-conflicts", "-f", path];
    for args in [&["diff", "-f", path][..], &server_side] {
        let r = k(&server, args);
        assert!(!r.ok, "diff exits 1 when something differs");
        let line = |sign: char, image: &str| {
            r.out.lines().any(|l| l.starts_with(sign) && l.contains(&format!("image: {image}")))
        };
        assert!(line('-', "nginx:2") && line('+', "nginx:3"), "{args:?}:\n{}\n{}", r.out, r.err);
    }
    assert_eq!(
        live(&server, "deployment/web")["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );

    // Every other write records its manager too.
    ok(&server, &["label", "deployment/web", "tier=front"]);
    ok(&server, &["scale", "deployment/web", "--replicas=3"]);
    let obj = live(&server, "deployment/web");
    assert_eq!(entry(&obj, "kubectl-label")["operation"], "Update");
    // kubectl scale names no field manager: its User-Agent does ("kubectl/v1.35.0 ...").
    let scale = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subresource"] == "scale");
    let scale = scale.unwrap_or_else(|| panic!("no scale entry: {}", obj["metadata"]));
    assert_eq!(
        (scale["manager"].as_str(), scale["operation"].as_str()),
        (Some("kubectl"), Some("Update"))
    );
    assert_eq!(scale["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn client_side_applied_objects_move_to_server_side_apply() {
    let server = ApiServer::start().unwrap();
    let file = server.dir().join("web.yaml");
    let path = file.to_str().unwrap();
    std::fs::write(&file, deployment(1, "nginx:1")).unwrap();
    assert_eq!(ok(&server, &["apply", "-f", path]), "deployment.apps/web created\n");
    let obj = live(&server, "deployment/web");
    assert_eq!(entry(&obj, "kubectl-client-side-apply")["operation"], "Update");

    // The same manifest, changed, applied server-side: kubectl takes over what client-side
    // apply set, without conflicts, and the last-applied annotation follows.
    std::fs::write(&file, deployment(4, "nginx:2")).unwrap();
    assert_eq!(
        ok(&server, &["apply", "--server-side", "-f", path]),
        "deployment.apps/web serverside-applied\n"
    );
    let obj = live(&server, "deployment/web");
    assert_eq!(obj["spec"]["replicas"], 4);
    assert_eq!(entry(&obj, "kubectl")["operation"], "Apply");
    let last: Value = serde_json::from_str(
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["spec"]["replicas"], 4);
}

#[tokio::test]
async fn kube_rs_patch_apply_creates_and_conflicts() {
    let server = ApiServer::start().unwrap();
    let client = server.admin_client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}});
    let made = cms.patch("settings", &PatchParams::apply("one"), &Patch::Apply(&cm)).await.unwrap();
    assert_eq!(made.data.unwrap()["a"], "1");
    let entries = made.metadata.managed_fields.unwrap();
    assert_eq!(
        (entries[0].manager.as_deref(), entries[0].operation.as_deref()),
        (Some("one"), Some("Apply"))
    );

    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "2"}});
    match cms.patch("settings", &PatchParams::apply("two"), &Patch::Apply(&other)).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert_eq!(s.message, r#"Apply failed with 1 conflict: conflict with "one": .data.a"#);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let forced = cms
        .patch("settings", &PatchParams::apply("two").force(), &Patch::Apply(&other))
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["a"], "2");
}
