//! Bad input over real HTTP: oversized, malformed, wrong-kind and invalid bodies get upstream's
//! status codes and messages (10,000 random bodies: `bad_input_fuzz.rs`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

#[macro_use]
mod support;

use serde_json::json;
use support::stores::Backend;
use support::{Client, JSON, PODS, Server, assert_status, pod, workload};

async fn oversized_malformed_wrong_kind_and_invalid_bodies_get_upstream_answers(b: Backend) {
    let server = Server::start_on(b).await;
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
    assert_status(&r, 422, "Invalid");
    let r = c
        .json("PATCH", &format!("{at}?fieldManager=m"), "application/apply-patch+yaml", &json!({}))
        .await;
    assert_eq!(assert_status(&r, 400, "BadRequest"), "invalid object type: /, Kind=");

    // None of it touched the stored pod.
    let r = c.send("GET", &at, None, vec![]).await;
    assert_eq!((r.code, r.body["metadata"]["resourceVersion"].is_string()), (200, true));
    server.stop().await;
}

async fn invalid_workloads_get_422_with_upstreams_paths_and_messages(b: Backend) {
    let server = Server::start_on(b).await;
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
async fn list_and_watch_parameters_that_contradict_each_other_get_upstream_answers(b: Backend) {
    let server = Server::start_on(b).await;
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

async fn reviews_are_answered_never_stored_and_malformed_ones_are_named(b: Backend) {
    let server = Server::start_on(b).await;
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
               "resourceAttributes": {"verb": "get", "resource": "nodes", "name": "node-a"}}})
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

on_every_store!(
    oversized_malformed_wrong_kind_and_invalid_bodies_get_upstream_answers,
    invalid_workloads_get_422_with_upstreams_paths_and_messages,
    list_and_watch_parameters_that_contradict_each_other_get_upstream_answers,
    reviews_are_answered_never_stored_and_malformed_ones_are_named,
);
