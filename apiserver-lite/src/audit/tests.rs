use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::http::body;

const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitManagedFields: true
rules:
- level: Metadata
  resources: [{group: \"\", resources: [secrets]}]
- level: RequestResponse
  resources: [{group: \"\", resources: [configmaps]}]
- level: Request
  verbs: [watch, create]
- level: None
";

fn auditor(dir: &Path) -> Arc<Auditor> {
    let policy = Policy::parse(Path::new("p"), POLICY).unwrap();
    let log = Log::open(&dir.join("audit.log"), Rotation::new(1, 0, 0)).unwrap();
    Arc::new(Auditor::new(policy, log))
}

fn info(verb: &str, resource: &str, name: &str, long: bool) -> RequestInfo {
    RequestInfo {
        uri: format!("/api/v1/namespaces/ns/{resource}/{name}"),
        verb: verb.into(),
        user_agent: Some("kubectl/v1.35.0".into()),
        source_ips: vec!["10.0.0.1".into(), "127.0.0.1".into()],
        object: Some(ObjectRef {
            version: "v1".into(),
            resource: resource.into(),
            namespace: "ns".into(),
            name: name.into(),
            ..ObjectRef::default()
        }),
        long_running: long,
    }
}

fn user() -> User {
    User { name: "alice".into(), groups: vec!["dev".into()], ..User::default() }
}

fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("audit.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_secret_at_metadata_level_logs_who_and_what_but_never_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let a = auditor(dir.path());
    let record = a.begin(info("create", "secrets", "", false), Some(&user()), None).unwrap();
    let secret = json!({"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "c2VjcmV0"}});
    let resp = scope(Some(record.clone()), async {
        body::parse(secret.to_string().as_bytes(), None).unwrap();
        body::json(201, &secret)
    })
    .await;
    let resp = record.finish(resp).await;
    assert_eq!(resp.status(), 201);
    let got = events(dir.path());
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["stage"], "RequestReceived");
    assert_eq!(got[1]["stage"], "ResponseComplete");
    assert_eq!(got[0]["auditID"], got[1]["auditID"]);
    let e = &got[1];
    assert_eq!(e["kind"], "Event");
    assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(e["level"], "Metadata");
    assert_eq!(e["verb"], "create");
    assert_eq!(e["user"], json!({"username": "alice", "groups": ["dev"]}));
    assert_eq!(e["sourceIPs"], json!(["10.0.0.1", "127.0.0.1"]));
    assert_eq!(e["userAgent"], "kubectl/v1.35.0");
    assert_eq!(
        e["objectRef"],
        json!({"resource": "secrets", "namespace": "ns", "name": "s", "apiVersion": "v1"})
    );
    assert_eq!(e["responseStatus"], json!({"metadata": {}, "code": 201}));
    let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    assert!(!text.contains("c2VjcmV0") && !text.contains("requestObject"), "{text}");
    let t = e["stageTimestamp"].as_str().unwrap();
    assert!(t.ends_with('Z') && t.len() == "2026-11-26T04:00:00.123456Z".len(), "{t}");
}

#[tokio::test]
async fn request_response_level_carries_both_objects_without_managed_fields() {
    let dir = tempfile::tempdir().unwrap();
    let a = auditor(dir.path());
    let record = a.begin(info("update", "configmaps", "c", false), Some(&user()), None).unwrap();
    let cm = json!({"kind": "ConfigMap", "metadata": {"name": "c", "managedFields": [{"manager": "m"}]}, "data": {"a": "1"}});
    let resp = scope(Some(record.clone()), async {
        body::parse(cm.to_string().as_bytes(), Some("application/json")).unwrap();
        body::json(200, &cm)
    })
    .await;
    let resp = record.finish(resp).await;
    let served = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    assert_eq!(
        serde_json::from_slice::<Value>(&served).unwrap(),
        cm,
        "the client still gets it all"
    );
    let got = events(dir.path());
    let done = &got[1];
    assert_eq!(done["requestObject"]["data"]["a"], "1");
    assert_eq!(done["responseObject"]["data"]["a"], "1");
    assert!(done["requestObject"]["metadata"].get("managedFields").is_none());
    assert!(done["responseObject"]["metadata"].get("managedFields").is_none());
    assert_eq!(done["objectRef"]["name"], "c");
}

#[tokio::test]
async fn a_failure_records_upstreams_status_and_unmatched_requests_log_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = auditor(dir.path());
    assert!(a.begin(info("get", "pods", "p", false), Some(&user()), None).is_none());
    let record = a.begin(info("create", "pods", "", false), None, None).unwrap();
    let resp = record.finish(body::error(&crate::errors::ApiError::unauthorized())).await;
    assert_eq!(resp.status(), 401);
    let got = events(dir.path());
    assert_eq!(got.len(), 2);
    assert_eq!(got[1]["user"], json!({}));
    assert_eq!(got[1]["responseStatus"]["code"], 401);
    assert_eq!(got[1]["responseStatus"]["reason"], "Unauthorized");
    assert_eq!(got[1]["responseStatus"]["status"], "Failure");
}

#[tokio::test]
async fn a_watch_logs_started_then_complete_when_its_stream_ends() {
    let dir = tempfile::tempdir().unwrap();
    let a = auditor(dir.path());
    let acting = User { name: "bob".into(), ..User::default() };
    let record = a.begin(info("watch", "pods", "", true), Some(&user()), Some(&acting)).unwrap();
    let resp = record.finish(body::bytes_response(200, "application/json", "{}")).await;
    assert_eq!(
        events(dir.path()).iter().map(|e| e["stage"].clone()).collect::<Vec<_>>(),
        ["RequestReceived", "ResponseStarted"]
    );
    let _ = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap();
    let got = events(dir.path());
    assert_eq!(got.len(), 3);
    assert_eq!(got[2]["stage"], "ResponseComplete");
    assert_eq!(got[2]["impersonatedUser"], json!({"username": "bob"}));
}
