//! Server-side apply and managedFields over HTTP, as kubectl and kube-rs send them: apply
//! creates, updates, conflicts with another manager and takes ownership when forced; every
//! write records its manager; the bad inputs answer in upstream's words.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use serde_json::{Value, json};
use support::{Client, JSON, Server, assert_status};

const APPLY: &str = "application/apply-patch+yaml";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image}]}}
        }
    })
}

fn entries(obj: &Value) -> Vec<(String, String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
                e["subresource"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap()
}

#[tokio::test]
async fn apply_creates_updates_conflicts_and_forces() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    let web = format!("{DEPLOYMENTS}/web");

    let r = c
        .json(
            "PATCH",
            &format!("{web}?fieldManager=kubectl&fieldValidation=Strict&force=false"),
            APPLY,
            &deployment(2, "nginx:1"),
        )
        .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(entries(&r.body), [("kubectl".into(), "Apply".into(), String::new())]);
    let fields = &entry(&r.body, "kubectl")["fieldsV1"];
    assert_eq!(fields["f:spec"]["f:replicas"], json!({}));
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]["."],
        json!({})
    );
    assert!(fields["f:metadata"].get("f:name").is_none());
    assert_eq!(r.body["spec"]["strategy"]["type"], "RollingUpdate", "defaults after the merge");

    // An update through apply: the image changes, nothing else.
    let r = c
        .json("PATCH", &format!("{web}?fieldManager=kubectl"), APPLY, &deployment(2, "nginx:2"))
        .await;
    assert_eq!(
        (r.code, r.body["spec"]["template"]["spec"]["containers"][0]["image"].as_str()),
        (200, Some("nginx:2"))
    );

    // Another manager changing replicas conflicts, with upstream's message and cause.
    let mut other = deployment(5, "nginx:2");
    other["spec"].as_object_mut().unwrap().remove("template");
    other["metadata"].as_object_mut().unwrap().remove("labels");
    let r = c.json("PATCH", &format!("{web}?fieldManager=ops"), APPLY, &other).await;
    let msg = assert_status(&r, 409, "Conflict");
    assert_eq!(msg, "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas");
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldManagerConflict", "message": "conflict with \"kubectl\"", "field": ".spec.replicas"})
    );

    // Forced, it takes the field.
    let r = c.json("PATCH", &format!("{web}?fieldManager=ops&force=true"), APPLY, &other).await;
    assert_eq!((r.code, r.body["spec"]["replicas"].as_i64()), (200, Some(5)));
    assert!(entry(&r.body, "kubectl")["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    assert_eq!(entry(&r.body, "ops")["fieldsV1"]["f:spec"]["f:replicas"], json!({}));

    // kubectl drops its label: removed, as no one else holds it.
    let mut dropped = deployment(5, "nginx:2");
    dropped["metadata"].as_object_mut().unwrap().remove("labels");
    dropped["spec"].as_object_mut().unwrap().remove("replicas");
    let r = c.json("PATCH", &format!("{web}?fieldManager=kubectl"), APPLY, &dropped).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(r.body["metadata"].get("labels").is_none(), "{}", r.body["metadata"]);
    assert_eq!(r.body["spec"]["replicas"], 5, "held by ops");

    // dryRun=All answers the change and stores nothing.
    let r = c
        .json(
            "PATCH",
            &format!("{web}?fieldManager=kubectl&dryRun=All"),
            APPLY,
            &deployment(5, "nginx:3"),
        )
        .await;
    assert_eq!(r.body["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:3");
    let r = c.send("GET", &web, None, Vec::new()).await;
    assert_eq!(r.body["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:2");
    server.stop().await;
}

#[tokio::test]
async fn every_write_records_its_manager() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    let mut body = deployment(1, "nginx:1");
    body["metadata"].as_object_mut().unwrap().remove("managedFields");
    let r =
        c.json("POST", &format!("{DEPLOYMENTS}?fieldManager=kubectl-create"), JSON, &body).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(entries(&r.body), [("kubectl-create".into(), "Update".into(), String::new())]);
    let web = format!("{DEPLOYMENTS}/web");

    let r = c
        .json(
            "PATCH",
            &format!("{web}/scale?fieldManager=kubectl-scale"),
            "application/merge-patch+json",
            &json!({"spec": {"replicas": 3}}),
        )
        .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = c.send("GET", &web, None, Vec::new()).await;
    let scale = entry(&r.body, "kubectl-scale");
    assert_eq!(
        (scale["subresource"].as_str(), &scale["fieldsV1"]),
        (Some("scale"), &json!({"f:spec": {"f:replicas": {}}}))
    );

    let mut status = r.body.clone();
    status["status"] = json!({"replicas": 3, "observedGeneration": 1});
    let r = c
        .json("PUT", &format!("{web}/status?fieldManager=kube-controller-manager"), JSON, &status)
        .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let e = entry(&r.body, "kube-controller-manager");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"]["f:status"]["f:replicas"], json!({}));

    let r = c
        .json(
            "PATCH",
            &format!("{web}?fieldManager=kubectl-label"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"tier": "a"}}}),
        )
        .await;
    assert_eq!(
        entry(&r.body, "kubectl-label")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}})
    );

    // managedFields: [] clears them, and an object without stays without.
    let r = c
        .json(
            "PATCH",
            &web,
            "application/merge-patch+json",
            &json!({"metadata": {"managedFields": []}}),
        )
        .await;
    assert!(r.body["metadata"].get("managedFields").is_none(), "{}", r.body["metadata"]);
    let r = c
        .json(
            "PATCH",
            &format!("{web}?fieldManager=x"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"b": "c"}}}),
        )
        .await;
    assert!(r.body["metadata"].get("managedFields").is_none());

    // The first apply then gives what was there to before-first-apply.
    let r = c
        .json(
            "PATCH",
            &format!("{web}?fieldManager=kubectl"),
            APPLY,
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}),
        )
        .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let managers: Vec<String> = entries(&r.body).into_iter().map(|e| e.0).collect();
    assert!(managers.contains(&"before-first-apply".to_string()), "{managers:?}");
    server.stop().await;
}

#[tokio::test]
async fn apply_on_the_status_and_scale_subresources() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    let web = format!("{DEPLOYMENTS}/web");
    let r = c
        .json("PATCH", &format!("{web}?fieldManager=kubectl"), APPLY, &deployment(1, "nginx:1"))
        .await;
    assert_eq!(r.code, 201);
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 4}});
    let r = c.json("PATCH", &format!("{web}/scale?fieldManager=hpa"), APPLY, &scale).await;
    assert_status(&r, 409, "Conflict");
    let r =
        c.json("PATCH", &format!("{web}/scale?fieldManager=hpa&force=true"), APPLY, &scale).await;
    assert_eq!(
        (r.code, r.body["kind"].as_str(), r.body["spec"]["replicas"].as_i64()),
        (200, Some("Scale"), Some(4))
    );
    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "status": {"replicas": 4}});
    let r = c.json("PATCH", &format!("{web}/status?fieldManager=ctl"), APPLY, &status).await;
    assert_eq!((r.code, r.body["status"]["replicas"].as_i64()), (200, Some(4)), "{}", r.body);
    let entries = entries(&r.body);
    assert!(entries.contains(&("hpa".into(), "Apply".into(), "scale".into())), "{entries:?}");
    assert!(entries.contains(&("ctl".into(), "Apply".into(), "status".into())), "{entries:?}");
    let mut absent = status.clone();
    absent["metadata"]["name"] = json!("absent");
    let r = c
        .json("PATCH", &format!("{DEPLOYMENTS}/absent/status?fieldManager=ctl"), APPLY, &absent)
        .await;
    assert_status(&r, 404, "NotFound");
    server.stop().await;
}

#[tokio::test]
async fn bad_applies_answer_in_upstreams_words() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    let web = format!("{DEPLOYMENTS}/web");
    let r = c.json("PATCH", &web, APPLY, &deployment(1, "a")).await;
    assert_eq!(
        assert_status(&r, 422, "Invalid"),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let r = c
        .json("PATCH", &format!("{web}?force=true"), "application/merge-patch+json", &json!({}))
        .await;
    assert!(
        assert_status(&r, 422, "Invalid")
            .contains("force: Forbidden: may not be specified for non-apply patch")
    );
    let r = c
        .send(
            "PATCH",
            &format!("{web}?fieldManager=m"),
            Some("application/apply-patch+cbor"),
            vec![0xa0],
        )
        .await;
    assert!(
        assert_status(&r, 415, "UnsupportedMediaType").contains("application/apply-patch+yaml")
    );
    let r = c
        .send("PATCH", &format!("{web}?fieldManager=m"), Some(APPLY), b"- a\n- b\n".to_vec())
        .await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    let mut dup = deployment(1, "a");
    dup["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]);
    let r = c.json("PATCH", &format!("{web}?fieldManager=m"), APPLY, &dup).await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "failed to create typed patch object (/web; apps/v1, Kind=Deployment): .spec.template.spec.containers[name=\"nginx\"].env: duplicate entries for key [name=\"A\"]"
    );
    let mut unknown = deployment(1, "a");
    unknown["spec"]["bogus"] = json!(1);
    let r = c
        .json("PATCH", &format!("{web}?fieldManager=m&fieldValidation=Strict"), APPLY, &unknown)
        .await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "failed to create typed patch object (/web; apps/v1, Kind=Deployment): .spec.bogus: field not declared in schema"
    );
    let mut other_kind = deployment(1, "a");
    other_kind["kind"] = json!("ReplicaSet");
    let r = c.json("PATCH", &format!("{web}?fieldManager=m"), APPLY, &other_kind).await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "invalid object type: apps/v1, Kind=ReplicaSet"
    );
    let r = c.send("GET", &web, None, Vec::new()).await;
    assert_status(&r, 404, "NotFound");
    server.stop().await;
}
