//! `pods/eviction` over HTTP against a real store, each of upstream's answers: a pod evicted
//! (gracefully, or at once when it is unscheduled, finished or given no grace), the
//! DeleteOptions an Eviction carries honoured (preconditions, dry run), the wrong pod, a
//! missing pod and bodies that are no Eviction refused in upstream's words, protobuf bodies
//! as kubectl's typed client sends them, and who may evict: RBAC, a node only its own pods.
//! No disruption budget is served, so none ever blocks an eviction.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use prost::Message;
use serde_json::{Value, json};
use support::{Client, JSON, PODS, Server, assert_status, pod};

const MERGE: &str = "application/merge-patch+json";

fn eviction(name: &str, options: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction",
           "metadata": {"name": name, "namespace": "default"}, "deleteOptions": options})
}

fn evict_path(name: &str) -> String {
    format!("{PODS}/{name}/eviction")
}

/// Creates pod `name`, bound to `node` if given, with `phase` written to its status.
async fn create(c: &mut Client, name: &str, node: Option<&str>, phase: &str) -> Value {
    let mut p = pod(name);
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    let r = c.json("POST", PODS, JSON, &p).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let status = json!({"status": {"phase": phase}});
    let r = c.json("PATCH", &format!("{PODS}/{name}/status"), MERGE, &status).await;
    assert_eq!(r.code, 200, "{}", r.body);
    r.body
}

async fn get(c: &mut Client, name: &str) -> (u16, Value) {
    let r = c.send("GET", &format!("{PODS}/{name}"), None, Vec::new()).await;
    (r.code, r.body)
}

fn assert_success(r: &support::Reply) {
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_evicted_pod_is_deleted_as_its_options_say() {
    let s = Server::start().await;
    let mut c = Client::new(s.addr);

    // A running pod on a node: deleted gracefully, with its own grace period.
    create(&mut c, "running", Some("n1"), "Running").await;
    assert_success(
        &c.json("POST", &evict_path("running"), JSON, &eviction("running", json!({}))).await,
    );
    let (code, p) = get(&mut c, "running").await;
    assert_eq!(code, 200);
    assert!(p["metadata"]["deletionTimestamp"].is_string(), "{p}");
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
    // Evicting it again while it goes is answered the same.
    assert_success(
        &c.json("POST", &evict_path("running"), JSON, &eviction("running", json!({}))).await,
    );

    // No grace: gone at once.
    create(&mut c, "now", Some("n1"), "Running").await;
    let body = eviction("now", json!({"gracePeriodSeconds": 0}));
    assert_success(&c.json("POST", &evict_path("now"), JSON, &body).await);
    assert_eq!(get(&mut c, "now").await.0, 404);

    // Finished and pending pods are deleted directly: a finished or unscheduled pod has no
    // grace period left.
    create(&mut c, "done", Some("n1"), "Succeeded").await;
    assert_success(&c.json("POST", &evict_path("done"), JSON, &eviction("done", json!({}))).await);
    assert_eq!(get(&mut c, "done").await.0, 404);
    create(&mut c, "pending", None, "Pending").await;
    assert_success(
        &c.json("POST", &evict_path("pending"), JSON, &eviction("pending", Value::Null)).await,
    );
    assert_eq!(get(&mut c, "pending").await.0, 404);

    // Without apiVersion and kind the body is still an Eviction; v1beta1 is accepted too.
    create(&mut c, "bare", None, "Pending").await;
    let r = c.json("POST", &evict_path("bare"), JSON, &json!({"metadata": {"name": "bare"}})).await;
    assert_success(&r);
    create(&mut c, "beta", None, "Pending").await;
    let mut body = eviction("beta", json!({}));
    body["apiVersion"] = json!("policy/v1beta1");
    assert_success(&c.json("POST", &evict_path("beta"), JSON, &body).await);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn preconditions_and_dry_run_of_the_eviction_are_honoured() {
    let s = Server::start().await;
    let mut c = Client::new(s.addr);
    let p = create(&mut c, "p", Some("n1"), "Running").await;
    let (uid, rv) = (
        p["metadata"]["uid"].as_str().unwrap(),
        p["metadata"]["resourceVersion"].as_str().unwrap(),
    );

    let body = eviction("p", json!({"preconditions": {"uid": "other"}}));
    let msg = assert_status(&c.json("POST", &evict_path("p"), JSON, &body).await, 409, "Conflict");
    assert!(msg.contains("UID in precondition: other"), "{msg}");
    let body = eviction("p", json!({"preconditions": {"resourceVersion": "1"}}));
    let msg = assert_status(&c.json("POST", &evict_path("p"), JSON, &body).await, 409, "Conflict");
    assert!(msg.contains("ResourceVersion in precondition: 1"), "{msg}");

    // Dry run, in the body or the query: answered, nothing changes.
    let body = eviction("p", json!({"dryRun": ["All"], "gracePeriodSeconds": 0}));
    assert_success(&c.json("POST", &evict_path("p"), JSON, &body).await);
    let body = eviction("p", json!({"gracePeriodSeconds": 0}));
    assert_success(&c.json("POST", &format!("{}?dryRun=All", evict_path("p")), JSON, &body).await);
    let (code, now) = get(&mut c, "p").await;
    assert_eq!((code, &now["metadata"]["deletionTimestamp"]), (200, &Value::Null));
    let body = eviction("p", json!({"dryRun": ["Never"]}));
    let r = c.json("POST", &format!("{}?dryRun=All", evict_path("p")), JSON, &body).await;
    assert_eq!(r.code, 500, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "Non-matching dry-run options in request and content: [All] and [Never]"
    );
    // Options a delete would refuse are refused here too.
    let body = eviction("p", json!({"dryRun": ["Never"]}));
    assert_status(&c.json("POST", &evict_path("p"), JSON, &body).await, 422, "Invalid");

    // The right ones go through.
    let body = eviction(
        "p",
        json!({"preconditions": {"uid": uid, "resourceVersion": rv},
                                    "gracePeriodSeconds": 0}),
    );
    assert_success(&c.json("POST", &evict_path("p"), JSON, &body).await);
    assert_eq!(get(&mut c, "p").await.0, 404);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_wrong_pod_a_missing_pod_and_bodies_that_are_no_eviction_are_refused() {
    let s = Server::start().await;
    let mut c = Client::new(s.addr);
    create(&mut c, "p", Some("n1"), "Running").await;
    let r = c.json("POST", &evict_path("p"), JSON, &eviction("q", json!({}))).await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "name in URL does not match name in Eviction object"
    );
    let mut other_ns = eviction("p", json!({}));
    other_ns["metadata"]["namespace"] = json!("kube-system");
    let r = c.json("POST", &evict_path("p"), JSON, &other_ns).await;
    assert_eq!(
        assert_status(&r, 400, "BadRequest"),
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let r = c.json("POST", &evict_path("nope"), JSON, &eviction("nope", json!({}))).await;
    assert_eq!(assert_status(&r, 404, "NotFound"), "pods \"nope\" not found");

    let r = c.json("POST", &evict_path("p"), JSON, &pod("p")).await;
    let msg = assert_status(&r, 400, "BadRequest");
    assert!(msg.starts_with("Pod in version \"v1\" cannot be handled as a Eviction"), "{msg}");
    let mut wrong_version = eviction("p", json!({}));
    wrong_version["apiVersion"] = json!("policy/v2");
    let msg = assert_status(
        &c.json("POST", &evict_path("p"), JSON, &wrong_version).await,
        400,
        "BadRequest",
    );
    assert!(msg.contains("no kind \"Eviction\" is registered for version \"policy/v2\""), "{msg}");
    let garbage = c.send("POST", &evict_path("p"), Some(JSON), b"{not json".to_vec()).await;
    assert_status(&garbage, 400, "BadRequest");
    let list = c.send("POST", &evict_path("p"), Some(JSON), b"[1, 2]".to_vec()).await;
    assert!(assert_status(&list, 400, "BadRequest").contains("must be of type Eviction"));
    let typed = eviction("p", json!({"gracePeriodSeconds": "soon"}));
    let msg =
        assert_status(&c.json("POST", &evict_path("p"), JSON, &typed).await, 400, "BadRequest");
    assert!(msg.contains("deleteOptions.gracePeriodSeconds"), "{msg}");
    let strict = format!("{}?fieldValidation=Strict", evict_path("p"));
    let unknown = eviction("p", json!({"grace": 1}));
    let msg = assert_status(&c.json("POST", &strict, JSON, &unknown).await, 400, "BadRequest");
    assert!(msg.contains("unknown field \"deleteOptions.grace\""), "{msg}");
    // None of these touched the pod.
    let (code, p) = get(&mut c, "p").await;
    assert_eq!((code, &p["metadata"]["deletionTimestamp"]), (200, &Value::Null));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_protobuf_eviction_as_kubectl_drain_sends_it() {
    use k8s_pb::api::policy::v1 as policy;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    let s = Server::start().await;
    let mut c = Client::new(s.addr);
    create(&mut c, "p", Some("n1"), "Running").await;
    let e = policy::Eviction {
        metadata: Some(meta::ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        delete_options: Some(meta::DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        }),
    };
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("policy/v1".into()),
            kind: Some("Eviction".into()),
        }),
        raw: Some(e.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let body = [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat();
    let r =
        c.send("POST", &evict_path("p"), Some("application/vnd.kubernetes.protobuf"), body).await;
    assert_success(&r);
    assert_eq!(get(&mut c, "p").await.0, 404);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rbac_decides_who_may_evict_and_a_node_evicts_only_its_own_pods() {
    let s = Server::start().await;
    let mut admin = Client::new(s.addr);
    create(&mut admin, "mine", Some("n1"), "Running").await;
    create(&mut admin, "theirs", Some("n2"), "Running").await;

    let mut jane = Client::impersonating(s.addr, "jane", &["system:authenticated"]);
    let r = jane.json("POST", &evict_path("mine"), JSON, &eviction("mine", json!({}))).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "pods \"mine\" is forbidden: User \"jane\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"default\""
    );

    let mut n1 = Client::impersonating(s.addr, "system:node:n1", &["system:nodes"]);
    let r = n1.json("POST", &evict_path("theirs"), JSON, &eviction("theirs", json!({}))).await;
    assert_eq!(
        assert_status(&r, 403, "Forbidden"),
        "pods \"theirs\" is forbidden: node n1 can only evict pods with spec.nodeName set to itself"
    );
    let r = n1.json("POST", &evict_path("gone"), JSON, &eviction("gone", json!({}))).await;
    assert_status(&r, 404, "NotFound");
    let r = n1.json("POST", &evict_path("mine"), JSON, &eviction("mine", json!({}))).await;
    assert_success(&r);
    assert!(get(&mut admin, "mine").await.1["metadata"]["deletionTimestamp"].is_string());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_lists_the_subresource_as_kubectl_drain_looks_for_it() {
    let s = Server::start().await;
    let mut c = Client::new(s.addr);
    let r = c.send("GET", "/api/v1", None, Vec::new()).await;
    let eviction = r.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/eviction")
        .cloned()
        .unwrap();
    assert_eq!(
        (&eviction["group"], &eviction["version"], &eviction["kind"], &eviction["verbs"]),
        (&json!("policy"), &json!("v1"), &json!("Eviction"), &json!(["create"]))
    );
    s.stop().await;
}
