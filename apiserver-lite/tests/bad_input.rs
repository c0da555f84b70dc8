//! Bad input over real HTTP: oversized, malformed, wrong-kind and invalid bodies get upstream's
//! status codes and messages, and 10,000 random bodies crash nothing and disturb nothing else.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::sync::Arc;

use apiserver_lite::admission::{Admission, Plugin};
use apiserver_lite::auth::Authenticator;
use apiserver_lite::http::ApiState;
use apiserver_lite::registry::Registry;
use apiserver_lite::server;
use apiserver_lite::storage::Store;
use apiserver_lite::storage::sqlite::SqliteBackend;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Server {
    addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let backend = SqliteBackend::open(&dir.path().join("db")).unwrap();
        let store = Arc::new(Store::open(Arc::new(backend)).unwrap());
        // No controller-manager makes `default` ServiceAccounts here (see registry.rs).
        let admission = Admission::default().without(Plugin::ServiceAccount);
        let registry = Arc::new(Registry::new(store).with_admission(admission));
        registry.bootstrap().await.unwrap();
        let listener = server::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pki = apiserver_lite::certs::ensure(&dir.path().join("pki"), &[]).unwrap();
        let kubelet = apiserver_lite::http::proxy::KubeletClient::new(
            &pki.kubelet_client_cert,
            &pki.kubelet_client_key,
            None,
            Default::default(),
        )
        .unwrap();
        let state = Arc::new(ApiState {
            registry,
            auth: Authenticator::default(),
            // Node,RBAC over the bootstrap policy: the reviews below ask about non-masters.
            authz: apiserver_lite::auth::Authorizer::node_rbac(Arc::new(
                apiserver_lite::auth::rbac::Rbac::with_index(
                    apiserver_lite::auth::rbac::Index::bootstrap(),
                ),
            )),
            address: addr.to_string(),
            kubelet,
            tokens: None,
            openid: None,
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(server::serve_insecure(listener, state, stop.clone()));
        Self { addr, stop, task, _dir: dir }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

/// One HTTP/1.1 connection, re-dialled when the server closes it.
struct Client {
    addr: SocketAddr,
    sender: Option<SendRequest<Full<Bytes>>>,
}

struct Reply {
    code: u16,
    body: Value,
}

impl Client {
    fn new(addr: SocketAddr) -> Self {
        Self { addr, sender: None }
    }

    async fn dial(&mut self) -> &mut SendRequest<Full<Bytes>> {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let (sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
        tokio::spawn(conn);
        self.sender.insert(sender)
    }

    async fn send(&mut self, method: &str, path: &str, ct: Option<&str>, body: Vec<u8>) -> Reply {
        let mut req = hyper::Request::builder().method(method).uri(path).header("host", "x");
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        let req = req.body(Full::new(Bytes::from(body))).unwrap();
        let alive = match self.sender.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        let sender = match self.sender.as_mut() {
            Some(s) if alive => s,
            _ => self.dial().await,
        };
        let resp = sender
            .send_request(req)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: the server dropped the connection: {e}"));
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or_else(
            |_| json!({"raw": String::from_utf8_lossy(&bytes[..bytes.len().min(200)])}),
        );
        Reply { code, body }
    }

    async fn json(&mut self, method: &str, path: &str, ct: &str, body: &Value) -> Reply {
        self.send(method, path, Some(ct), serde_json::to_vec(body).unwrap()).await
    }
}

const PODS: &str = "/api/v1/namespaces/default/pods";
const JSON: &str = "application/json";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.35", "ports": [{"containerPort": 80}]}]}})
}

fn assert_status(r: &Reply, code: u16, reason: &str) -> String {
    assert_eq!((r.code, r.body["kind"].as_str()), (code, Some("Status")), "{}", r.body);
    assert_eq!(r.body["code"], code, "{}", r.body);
    assert_eq!(r.body["reason"], reason, "{}", r.body);
    assert_eq!(r.body["status"], "Failure", "{}", r.body);
    r.body["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn oversized_malformed_wrong_kind_and_invalid_bodies_get_upstream_answers() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);

    // More than upstream's 3 MiB: 413, and the connection or the next one still works.
    let mut big = pod("big");
    big["metadata"]["annotations"] = json!({"a": "x".repeat(3 * 1024 * 1024)});
    let r = c.json("POST", PODS, JSON, &big).await;
    let msg = assert_status(&r, 413, "RequestEntityTooLarge");
    assert_eq!(msg, "Request entity too large: limit is 3145728");

    // Malformed JSON and YAML: 400 naming where.
    let r = c.send("POST", PODS, Some(JSON), b"{\"metadata\": {\"name\": ".to_vec()).await;
    let msg = assert_status(&r, 400, "BadRequest");
    assert!(msg.contains("not valid JSON") && msg.contains("line 1 column 22"), "{msg}");
    let r = c.send("POST", PODS, Some("application/yaml"), b"metadata: [name: x".to_vec()).await;
    let msg = assert_status(&r, 400, "BadRequest");
    assert!(msg.contains("not valid YAML"), "{msg}");
    // Aliases that would expand to 9^9 nodes are refused, not expanded.
    let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        laughs += &format!("{name}: &{name} [{}]\n", vec![format!("*{prev}"); 9].join(", "));
    }
    let r = c.send("POST", PODS, Some("application/yaml"), laughs.into_bytes()).await;
    assert_status(&r, 400, "BadRequest");
    let r = c.send("POST", PODS, Some(JSON), b"[1, 2]".to_vec()).await;
    assert_status(&r, 400, "BadRequest");
    // A field of the wrong type is named by its path.
    let mut wrong = pod("wrong");
    wrong["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("eighty");
    let msg = assert_status(&c.json("POST", PODS, JSON, &wrong).await, 400, "BadRequest");
    assert!(
        msg.starts_with("Pod in version \"v1\" cannot be handled as a Pod: spec.containers[0].ports[0].containerPort"),
        "{msg}"
    );
    let r = c.send("POST", PODS, Some("text/plain"), b"hello".to_vec()).await;
    assert_status(&r, 415, "UnsupportedMediaType");

    // Another kind, or another version, sent to pods.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}});
    let msg = assert_status(&c.json("POST", PODS, JSON, &svc).await, 400, "BadRequest");
    assert!(msg.starts_with("Service in version \"v1\" cannot be handled as a Pod"), "{msg}");
    let mut apps = pod("apps");
    apps["apiVersion"] = json!("apps/v1");
    let msg = assert_status(&c.json("POST", PODS, JSON, &apps).await, 400, "BadRequest");
    assert_eq!(
        msg,
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    );
    // A name on the URL that is not the body's.
    c.json("POST", PODS, JSON, &pod("web")).await;
    let msg = assert_status(
        &c.json("PUT", &format!("{PODS}/other"), JSON, &pod("web")).await,
        400,
        "BadRequest",
    );
    assert_eq!(msg, "the name of the object (web) does not match the name on the URL (other)");

    // Invalid: 422 with every cause and its field path.
    let mut bad = pod("Bad_Name");
    bad["spec"]["containers"][0]["image"] = json!("");
    bad["spec"]["restartPolicy"] = json!("Sometimes");
    let r = c.json("POST", PODS, JSON, &bad).await;
    let msg = assert_status(&r, 422, "Invalid");
    assert!(msg.starts_with("Pod \"Bad_Name\" is invalid: ["), "{msg}");
    let fields: Vec<&str> = r.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["field"].as_str())
        .collect();
    for f in ["metadata.name", "spec.containers[0].image", "spec.restartPolicy"] {
        assert!(fields.contains(&f), "{f} missing from {fields:?}");
    }
    assert_eq!(r.body["details"]["kind"], "Pod");
    assert_eq!(r.body["details"]["name"], "Bad_Name");

    // Patches that do not apply.
    let at = format!("{PODS}/web");
    let r = c.send("PATCH", &at, Some("application/json-patch+json"), b"{}".to_vec()).await;
    assert_status(&r, 400, "BadRequest");
    let remove = json!([{"op": "remove", "path": "/spec/nonexistent"}]);
    let r = c.json("PATCH", &at, "application/json-patch+json", &remove).await;
    assert!(r.code == 422 || r.code == 400, "{}", r.body);
    let r = c.json("PATCH", &at, "application/apply-patch+yaml", &json!({})).await;
    assert_status(&r, 415, "UnsupportedMediaType");

    // None of it touched the stored pod.
    let r = c.send("GET", &at, None, vec![]).await;
    assert_eq!((r.code, r.body["metadata"]["resourceVersion"].is_string()), (200, true));
    server.stop().await;
}

/// A workload's template (`restartPolicy` as given), labelled `app: web`.
fn workload(kind: &str, name: &str, restart: &str) -> Value {
    let (group, spec) = match kind {
        "Job" => ("batch/v1", json!({"template": {"spec": pod("x")["spec"]}})),
        "CronJob" => (
            "batch/v1",
            json!({"schedule": "@hourly", "jobTemplate": {"spec": {"template": {"spec": pod("x")["spec"]}}}}),
        ),
        _ => (
            "apps/v1",
            json!({"selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod("x")["spec"]}}),
        ),
    };
    let mut w =
        json!({"apiVersion": group, "kind": kind, "metadata": {"name": name}, "spec": spec});
    let template = match kind {
        "CronJob" => &mut w["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &mut w["spec"]["template"]["spec"],
    };
    template["restartPolicy"] = json!(restart);
    w
}

#[tokio::test]
async fn invalid_workloads_get_422_with_upstreams_paths_and_messages() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    let apps = "/apis/apps/v1/namespaces/default";
    let batch = "/apis/batch/v1/namespaces/default";
    let mut mismatched = workload("ReplicaSet", "rs", "Always");
    mismatched["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let mut frozen = workload("Deployment", "frozen", "Always");
    frozen["spec"]["strategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}});
    let mut every61 = workload("CronJob", "every61", "OnFailure");
    every61["spec"]["schedule"] = json!("*/5 * * * 8");
    let mut mars = workload("CronJob", "mars", "OnFailure");
    mars["spec"]["timeZone"] = json!("Mars/Olympus");
    let mut owned = pod("owned");
    let owner = |kind: &str, name: &str| json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": format!("uid-{name}"), "controller": true});
    owned["metadata"]["ownerReferences"] =
        json!([owner("ReplicaSet", "a"), owner("ReplicaSet", "b")]);
    let mut unnamed_owner = pod("unnamed-owner");
    unnamed_owner["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Node", "name": "", "uid": "u"}]);
    let cases = [
        (
            format!("{apps}/replicasets"),
            mismatched,
            "ReplicaSet \"rs\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
        ),
        (
            format!("{apps}/deployments"),
            frozen,
            "Deployment \"frozen\" is invalid: spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0",
        ),
        (
            format!("{apps}/daemonsets"),
            workload("DaemonSet", "never", "Never"),
            "DaemonSet \"never\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ),
        (
            format!("{batch}/jobs"),
            workload("Job", "always", "Always"),
            "Job \"always\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
        ),
        (
            format!("{batch}/cronjobs"),
            every61,
            "CronJob \"every61\" is invalid: spec.schedule: Invalid value: \"*/5 * * * 8\": end of range (8) above maximum (6): 8",
        ),
        (
            format!("{batch}/cronjobs"),
            mars,
            "CronJob \"mars\" is invalid: spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
        ),
        (
            PODS.to_string(),
            owned,
            "Pod \"owned\" is invalid: metadata.ownerReferences: Invalid value: [{",
        ),
        (
            PODS.to_string(),
            unnamed_owner,
            "Pod \"unnamed-owner\" is invalid: metadata.ownerReferences.name: Invalid value: \"\": must not be empty",
        ),
    ];
    for (path, body, want) in cases {
        let r = c.json("POST", &path, JSON, &body).await;
        let msg = assert_status(&r, 422, "Invalid");
        assert!(msg.starts_with(want), "{path}:\n got {msg}\nwant {want}");
    }
    let r = c.json("POST", PODS, JSON, &json!({"metadata": {"name": "x"}})).await;
    assert_status(&r, 422, "Invalid");
    let mut owned = pod("owned");
    owned["metadata"]["ownerReferences"] = json!([owner("ReplicaSet", "a"), {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "b", "uid": "u", "controller": true}]);
    let msg = assert_status(&c.json("POST", PODS, JSON, &owned).await, 422, "Invalid");
    assert!(
        msg.ends_with("Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/a and DaemonSet/b"),
        "{msg}"
    );
    // A Scale with negative replicas is refused as upstream words it; a good one lands.
    let web = workload("Deployment", "web", "Always");
    assert_eq!(c.json("POST", &format!("{apps}/deployments"), JSON, &web).await.code, 201);
    let scale = format!("{apps}/deployments/web/scale");
    let r = c
        .json("PATCH", &scale, "application/merge-patch+json", &json!({"spec": {"replicas": -1}}))
        .await;
    let msg = assert_status(&r, 422, "Invalid");
    assert_eq!(
        msg,
        "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    let r = c
        .json("PATCH", &scale, "application/merge-patch+json", &json!({"spec": {"replicas": 3}}))
        .await;
    assert_eq!((r.code, &r.body["spec"]["replicas"]), (200, &json!(3)), "{}", r.body);
    assert_eq!(r.body["status"]["selector"], "app=web");
    // Delete options: a policy that does not exist, or two that contradict, are 422; the
    // query's policy counts as the body's; orphanDependents=false still pending is 202.
    let at = format!("{apps}/deployments/web");
    let sideways =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Sideways"});
    let msg = assert_status(&c.json("DELETE", &at, JSON, &sideways).await, 422, "Invalid");
    assert_eq!(
        msg,
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    let both = json!({"propagationPolicy": "Orphan", "orphanDependents": true});
    assert_status(&c.json("DELETE", &at, JSON, &both).await, 422, "Invalid");
    let r = c.send("DELETE", &format!("{at}?propagationPolicy=Foreground"), None, vec![]).await;
    assert_eq!(
        (r.code, &r.body["metadata"]["finalizers"]),
        (200, &json!(["foregroundDeletion"])),
        "{}",
        r.body
    );
    let mut held = workload("Deployment", "held", "Always");
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    assert_eq!(c.json("POST", &format!("{apps}/deployments"), JSON, &held).await.code, 201);
    let r = c
        .json(
            "DELETE",
            &format!("{apps}/deployments/held"),
            JSON,
            &json!({"orphanDependents": false}),
        )
        .await;
    assert_eq!(r.code, 202, "{}", r.body);
    // The legacy flag set false asks for the background: the GC finalizer goes, and the object.
    let r = c.json("DELETE", &at, JSON, &json!({"orphanDependents": false})).await;
    assert_eq!((r.code, &r.body["status"]), (200, &json!("Success")), "{}", r.body);
    // Nothing of it was stored.
    for path in
        [format!("{apps}/replicasets"), format!("{batch}/jobs"), format!("{batch}/cronjobs")]
    {
        let r = c.send("GET", &path, None, vec![]).await;
        assert_eq!(r.body["items"], json!([]), "{path}");
    }
    server.stop().await;
}

/// A random JSON value, at most `depth` deep.
#[tokio::test]
async fn list_and_watch_parameters_that_contradict_each_other_get_upstream_answers() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    for name in ["a", "b", "c"] {
        assert_eq!(c.json("POST", PODS, JSON, &pod(name)).await.code, 201);
    }
    let get = |q: &str| format!("{PODS}?{q}");
    let cases = [
        (
            "resourceVersionMatch=Exact",
            422,
            "Invalid",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            422,
            "Invalid",
            "\"exact\" is forbidden for resourceVersion \"0\"",
        ),
        (
            "resourceVersion=3&resourceVersionMatch=Latest",
            422,
            "Invalid",
            "Unsupported value: \"Latest\"",
        ),
        ("resourceVersion=abc", 400, "BadRequest", "invalid resource version \"abc\""),
        (
            "resourceVersion=999999&resourceVersionMatch=Exact",
            504,
            "Timeout",
            "Too large resource version: 999999",
        ),
        ("limit=1&continue=nonsense", 400, "BadRequest", "continue key is not valid"),
        ("sendInitialEvents=true", 422, "Invalid", "sendInitialEvents is forbidden for list"),
        (
            "watch=true&resourceVersionMatch=NotOlderThan",
            422,
            "Invalid",
            "forbidden for watch unless sendInitialEvents",
        ),
        (
            "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact",
            422,
            "Invalid",
            "requires setting resourceVersionMatch to NotOlderThan",
        ),
    ];
    for (q, code, reason, words) in cases {
        let r = c.send("GET", &get(q), None, vec![]).await;
        let msg = assert_status(&r, code, reason);
        assert!(msg.contains(words), "{q}: {msg}");
    }
    let r = c.send("GET", &get("resourceVersionMatch=Exact"), None, vec![]).await;
    assert_eq!(r.body["details"]["kind"], "ListOptions");
    assert_eq!(r.body["details"]["causes"][0]["field"], "resourceVersionMatch");

    // Paging over HTTP: the second page is read at the first page's revision.
    let first = c.send("GET", &get("limit=2"), None, vec![]).await;
    let token = first.body["metadata"]["continue"].as_str().unwrap().to_string();
    assert_eq!(first.body["metadata"]["remainingItemCount"], 1);
    let r = c.send("DELETE", &format!("{PODS}/c"), None, vec![]).await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = c
        .send("GET", &get(&format!("limit=2&continue={token}&resourceVersion=5")), None, vec![])
        .await;
    assert_status(&r, 400, "BadRequest");
    let second = c.send("GET", &get(&format!("limit=2&continue={token}")), None, vec![]).await;
    assert_eq!(second.code, 200, "{}", second.body);
    assert_eq!(second.body["items"][0]["metadata"]["name"], "c");
    assert_eq!(
        second.body["metadata"]["resourceVersion"],
        first.body["metadata"]["resourceVersion"]
    );
    let rv = first.body["metadata"]["resourceVersion"].as_str().unwrap();
    let exact = c
        .send(
            "GET",
            &get(&format!("resourceVersion={rv}&resourceVersionMatch=Exact")),
            None,
            vec![],
        )
        .await;
    assert_eq!(exact.body["items"].as_array().unwrap().len(), 3, "{}", exact.body);
    server.stop().await;
}

#[tokio::test]
async fn reviews_are_answered_never_stored_and_malformed_ones_are_named() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    let ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let ask = json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let r = c.json("POST", ssar, JSON, &ask).await;
    assert_eq!((r.code, &r.body["status"]["allowed"]), (201, &json!(true)), "{}", r.body);
    assert_eq!(r.body["kind"], "SelfSubjectAccessReview");
    // Only create: nothing is stored to get, list or delete.
    for (method, path) in
        [("GET", ssar.to_string()), ("DELETE", format!("{ssar}/x")), ("POST", format!("{ssar}/x"))]
    {
        let r = c.send(method, &path, None, vec![]).await;
        assert_status(&r, 405, "MethodNotAllowed");
    }
    let r = c.json("POST", ssar, JSON, &json!({"spec": {}})).await;
    let msg = assert_status(&r, 422, "Invalid");
    assert!(msg.contains("spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"), "{msg}");
    let both = json!({"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/version", "verb": "get"}}});
    let msg = assert_status(&c.json("POST", ssar, JSON, &both).await, 422, "Invalid");
    assert!(msg.contains("spec.nonResourceAttributes: Invalid value: {"), "{msg}");
    let wrong = json!({"spec": {"resourceAttributes": {"verb": 7}}});
    let msg = assert_status(&c.json("POST", ssar, JSON, &wrong).await, 400, "BadRequest");
    assert!(msg.contains("spec.resourceAttributes.verb"), "{msg}");
    // About someone else: the subject's answer, and a subject is required.
    let sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let about = |user: &str| {
        json!({"spec": {"user": user, "groups": ["system:nodes"],
               "resourceAttributes": {"verb": "create", "resource": "nodes", "subresource": "proxy", "name": "node-a"}}})
    };
    let r = c.json("POST", sar, JSON, &about("system:node:node-a")).await;
    assert_eq!((r.code, &r.body["status"]["allowed"]), (201, &json!(true)), "{}", r.body);
    let r = c.json("POST", sar, JSON, &about("system:node:node-b")).await;
    assert_eq!((r.code, &r.body["status"]["allowed"]), (201, &json!(false)), "{}", r.body);
    let nobody = json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    let msg = assert_status(&c.json("POST", sar, JSON, &nobody).await, 422, "Invalid");
    assert!(
        msg.contains(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        ),
        "{msg}"
    );
    let tokens = "/apis/authentication.k8s.io/v1/tokenreviews";
    let r = c.json("POST", tokens, JSON, &json!({"spec": {"token": "not-a-token"}})).await;
    assert_eq!((r.code, &r.body["status"]["authenticated"]), (201, &json!(false)), "{}", r.body);
    let rules = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    for body in [json!({"spec": {"namespace": "default"}}), json!({})] {
        let r = c.json("POST", rules, JSON, &body).await;
        assert_eq!(r.code, 201, "{body}: {}", r.body);
        assert_eq!(r.body["status"]["resourceRules"][0]["verbs"], json!(["*"]), "{}", r.body);
    }
    let wrong = json!({"spec": {"namespace": 7}});
    let msg = assert_status(&c.json("POST", rules, JSON, &wrong).await, 400, "BadRequest");
    assert!(msg.contains("spec.namespace"), "{msg}");
    let whoami = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let r = c.json("POST", whoami, JSON, &json!({})).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert!(r.body["status"]["userInfo"]["username"].is_string(), "{}", r.body);
    server.stop().await;
}

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>() * 1e300),
        4 => json!(random_string(rng)),
        5 => json!(
            ["", "0", "-1", "1Gi", "100m", "Always", "TCP", "a.b/c", "\u{0}"]
                [rng.random_range(0..9)]
        ),
        6 => Value::Array(
            (0..rng.random_range(0..4)).map(|_| random_value(rng, depth - 1)).collect(),
        ),
        _ => Value::Object(
            (0..rng.random_range(0..4))
                .map(|_| (random_string(rng), random_value(rng, depth - 1)))
                .collect(),
        ),
    }
}

fn random_string(rng: &mut StdRng) -> String {
    let len = if rng.random_ratio(1, 50) {
        rng.random_range(0..100_000)
    } else {
        rng.random_range(0..20)
    };
    (0..len)
        .map(|_| {
            if rng.random_ratio(1, 10) { rng.random::<char>() } else { rng.random_range('a'..='z') }
        })
        .collect()
}

/// Replaces, removes or adds something at a random place in `v`.
fn mutate(rng: &mut StdRng, v: &mut Value) {
    let descend = rng.random_ratio(3, 4);
    match v {
        Value::Object(m) if !m.is_empty() && descend => {
            let key = m.keys().nth(rng.random_range(0..m.len())).unwrap().clone();
            match rng.random_range(0..6) {
                0 => {
                    m.remove(&key);
                }
                1 => {
                    m.insert(key, random_value(rng, 3));
                }
                _ => mutate(rng, m.get_mut(&key).unwrap()),
            }
        }
        Value::Array(a) if !a.is_empty() && descend => {
            let i = rng.random_range(0..a.len());
            mutate(rng, &mut a[i]);
        }
        Value::Object(m) if rng.random() => {
            m.insert(random_string(rng), random_value(rng, 3));
        }
        _ => *v = random_value(rng, 3),
    }
}

fn templates() -> Vec<(&'static str, Value)> {
    vec![
        (PODS, pod("fuzz")),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                            "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod("x")["spec"]}}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                   "spec": {"selector": {"app": "d"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
        ),
        ("/apis/batch/v1/namespaces/default/jobs", workload("Job", "j", "Never")),
        ("/apis/batch/v1/namespaces/default/cronjobs", workload("CronJob", "cj", "OnFailure")),
        ("/apis/apps/v1/namespaces/default/daemonsets", workload("DaemonSet", "ds", "Always")),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "spec": {"resourceAttributes": {"verb": "get", "group": "apps", "resource": "deployments", "namespace": "default", "name": "d"}}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": {"user": "system:node:a", "groups": ["system:nodes"], "resourceAttributes": {"verb": "create", "resource": "nodes", "subresource": "proxy", "name": "a"}}}),
        ),
        (
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                   "spec": {"token": "abc", "audiences": ["x"]}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                   "spec": {"namespace": "default"}}),
        ),
    ]
}

/// A random body: raw bytes, a mutated or truncated object, deep nesting, or a YAML rendering.
fn random_body(rng: &mut StdRng, template: &Value) -> Vec<u8> {
    match rng.random_range(0..10) {
        0 => (0..rng.random_range(0..2048)).map(|_| rng.random()).collect(),
        1 => {
            let mut b = serde_json::to_vec(template).unwrap();
            b.truncate(rng.random_range(0..b.len()));
            b
        }
        2 => {
            let mut b = serde_json::to_vec(template).unwrap();
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random();
            }
            b
        }
        3 => {
            let n = rng.random_range(1..5000);
            let (open, close) = if rng.random() { ("[", "]") } else { ("{\"a\":", "}") };
            format!("{}1{}", open.repeat(n), close.repeat(n)).into_bytes()
        }
        4 => serde_yaml_ng::to_string(template).unwrap().into_bytes(),
        _ => {
            let mut v = template.clone();
            for _ in 0..rng.random_range(1..6) {
                mutate(rng, &mut v);
            }
            serde_json::to_vec(&v).unwrap()
        }
    }
}

#[tokio::test]
async fn ten_thousand_random_bodies_crash_nothing_and_disturb_nothing_else() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    // A bystander the fuzzer never addresses, and a target it patches and replaces.
    let bystander = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}, "data": {"k": "v"}});
    let kept = c.json("POST", "/api/v1/namespaces/kube-system/configmaps", JSON, &bystander).await;
    assert_eq!(kept.code, 201);
    assert_eq!(c.json("POST", PODS, JSON, &pod("target")).await.code, 201);

    let seed = rand::random::<u64>();
    let mut rng = StdRng::seed_from_u64(seed);
    let templates = templates();
    let types = [
        Some(JSON),
        Some(JSON),
        Some("application/yaml"),
        Some("application/vnd.kubernetes.protobuf"),
        Some("application/merge-patch+json"),
        Some("application/strategic-merge-patch+json"),
        Some("application/json-patch+json"),
        None,
        Some("garbage/;;x=\"y"),
    ];
    let mut by_code = std::collections::BTreeMap::<u16, u32>::new();
    for i in 0..10_000 {
        let (path, template) = &templates[rng.random_range(0..templates.len())];
        let mut body = random_body(&mut rng, template);
        let ct = types[rng.random_range(0..types.len())];
        if ct == Some("application/vnd.kubernetes.protobuf") && rng.random() {
            body.splice(0..0, *b"k8s\0");
        }
        let (method, path) = match (rng.random_range(0..10), ct) {
            (_, Some(t)) if t.contains("patch") => ("PATCH", format!("{PODS}/target")),
            (0, _) => ("PUT", format!("{PODS}/target")),
            (1, _) => ("PUT", format!("{PODS}/target/status")),
            (2, _) => ("DELETE", format!("{PODS}/absent-{i}")),
            _ => ("POST", path.to_string()),
        };
        let ct = ct.filter(|_| !(method == "PATCH" && rng.random_ratio(1, 20)));
        let r = c.send(method, &path, ct, body).await;
        *by_code.entry(r.code).or_default() += 1;
        assert!(
            r.code < 500,
            "seed {seed}, request {i}: {method} {path} answered {}: {}",
            r.code,
            r.body
        );
        if r.code >= 400 {
            assert_eq!(r.body["kind"], "Status", "seed {seed}, request {i}: {}", r.body);
            assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
        }
    }
    eprintln!("seed {seed}: answers by status code {by_code:?}");

    let after = c.send("GET", "/api/v1/namespaces/kube-system/configmaps/keep", None, vec![]).await;
    assert_eq!(after.body["metadata"]["resourceVersion"], kept.body["metadata"]["resourceVersion"]);
    assert_eq!(c.send("GET", "/readyz", None, vec![]).await.code, 200);
    server.stop().await;
}
