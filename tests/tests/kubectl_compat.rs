//! The real kubectl v1.35 against apiserver-lite: every command the issue lists, its output
//! asserted.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Stdio;
use std::time::{Duration, Instant};

use e2e::apiserver::{ApiServer, KubectlRun as Run, Store, kubectl_binary, start_on_store};

fn k(server: &ApiServer, args: &[&str]) -> Run {
    server.kubectl_run(args).unwrap()
}

/// Runs kubectl and requires success, returning stdout.
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

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: nginx-pod
  labels:
    app: nginx
spec:
  containers:
  - name: nginx
    image: nginx:1.8
";

#[test]
fn kubectl_v1_35_works_against_apiserver_lite() {
    kubectl_v1_35_works_on(Store::Sqlite);
}

#[test]
fn kubectl_v1_35_works_against_apiserver_lite_on_one_etcd_member() {
    kubectl_v1_35_works_on(Store::Etcd(1));
}

#[test]
fn kubectl_v1_35_works_against_apiserver_lite_on_three_etcd_members() {
    kubectl_v1_35_works_on(Store::Etcd(3));
}

fn kubectl_v1_35_works_on(store: Store) {
    let (server, _etcd) = start_on_store(store, &[]).unwrap();
    let dir = server.dir().to_path_buf();
    let pod_file = dir.join("nginx_pod.yaml");
    std::fs::write(&pod_file, POD).unwrap();
    let pod_file = pod_file.to_str().unwrap();

    assert!(ok(&server, &["version"]).contains("Server Version: v1.35"));
    let resources = ok(&server, &["api-resources"]);
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("pods ") && l.contains(" po ") && l.contains("Pod")),
        "{resources}"
    );
    assert!(
        resources.lines().any(|l| l.starts_with("deployments ") && l.contains("apps/v1")),
        "{resources}"
    );

    // The seed's flow.
    assert_eq!(ok(&server, &["create", "-f", pod_file]), "pod/nginx-pod created\n");
    let again = k(&server, &["create", "-f", pod_file]);
    assert!(
        !again.ok
            && again.err.contains("Error from server (AlreadyExists)")
            && again.err.contains("pods \"nginx-pod\" already exists"),
        "{}",
        again.err
    );
    let get = ok(&server, &["get", "pods"]);
    let mut lines = get.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["nginx-pod", "0/1", "Pending", "0"]);
    assert!(
        ok(&server, &["get", "pods", "-o", "wide"])
            .lines()
            .next()
            .unwrap()
            .contains("IP       NODE     NOMINATED NODE   READINESS GATES")
    );
    let all = ok(&server, &["get", "pods", "-A", "--show-labels"]);
    assert!(
        all.starts_with("NAMESPACE") && all.contains("default") && all.contains("app=nginx"),
        "{all}"
    );
    let yaml = ok(&server, &["get", "pod", "nginx-pod", "-o", "yaml"]);
    assert!(
        yaml.contains("name: nginx-pod")
            && yaml.contains("imagePullPolicy: IfNotPresent")
            && yaml.contains("phase: Pending"),
        "{yaml}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&server, &["get", "pod", "nginx-pod", "-o", "json"])).unwrap();
    assert_eq!(
        (json["kind"].as_str(), json["spec"]["restartPolicy"].as_str()),
        (Some("Pod"), Some("Always"))
    );
    let list: serde_json::Value =
        serde_json::from_str(&ok(&server, &["get", "pods", "-o", "json"])).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let missing = k(&server, &["get", "pod", "nope"]);
    assert!(
        !missing.ok
            && missing.err.contains("Error from server (NotFound): pods \"nope\" not found"),
        "{}",
        missing.err
    );
    assert!(ok(&server, &["get", "pods", "-l", "app=nginx"]).contains("nginx-pod"));
    let none = k(&server, &["get", "pods", "-l", "app=other"]);
    assert!(
        none.ok && none.err.contains("No resources found in default namespace."),
        "{}",
        none.err
    );

    // get -w sees a change made while it watches.
    let mut watch = std::process::Command::new(kubectl_binary().unwrap())
        .args(["get", "pods", "-w"])
        .env("KUBECONFIG", server.kubeconfig())
        .env("HOME", dir.join("home"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        ok(&server, &["label", "pod", "nginx-pod", "tier=front"]),
        "pod/nginx-pod labeled\n"
    );
    std::thread::sleep(Duration::from_secs(1));
    let _ = watch.kill();
    let watched = String::from_utf8_lossy(&watch.wait_with_output().unwrap().stdout).into_owned();
    assert_eq!(
        watched.lines().filter(|l| l.starts_with("nginx-pod")).count(),
        2,
        "the listing and the change: {watched}"
    );

    assert_eq!(
        ok(&server, &["annotate", "pod", "nginx-pod", "note=hello"]),
        "pod/nginx-pod annotated\n"
    );
    assert_eq!(
        ok(
            &server,
            &["patch", "pod", "nginx-pod", "-p", r#"{"metadata":{"labels":{"patched":"yes"}}}"#]
        ),
        "pod/nginx-pod patched\n"
    );
    assert_eq!(
        ok(
            &server,
            &[
                "patch",
                "pod",
                "nginx-pod",
                "--type=json",
                "-p",
                r#"[{"op":"add","path":"/metadata/labels/j","value":"1"}]"#
            ]
        ),
        "pod/nginx-pod patched\n"
    );
    let labels = ok(&server, &["get", "pod", "nginx-pod", "--show-labels"]);
    assert!(labels.contains("app=nginx,j=1,patched=yes,tier=front"), "{labels}");
    let describe = ok(&server, &["describe", "pod", "nginx-pod"]);
    let fields: Vec<String> =
        describe.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    for want in [
        "Name: nginx-pod",
        "Namespace: default",
        "Annotations: note: hello",
        "Status: Pending",
        "Image: nginx:1.8",
        "QoS Class: BestEffort",
    ] {
        assert!(fields.iter().any(|f| f == want), "describe lacks {want:?}:\n{describe}");
    }
    assert!(k(&server, &["get", "events"]).ok);

    // Client-side apply: create, unchanged, configured.
    let applied = dir.join("applied.yaml");
    std::fs::write(&applied, POD.replace("nginx-pod", "applied")).unwrap();
    let applied = applied.to_str().unwrap();
    assert_eq!(ok(&server, &["apply", "-f", applied]), "pod/applied created\n");
    assert_eq!(ok(&server, &["apply", "-f", applied]), "pod/applied unchanged\n");
    std::fs::write(
        applied,
        POD.replace("nginx-pod", "applied").replace("app: nginx", "app: changed"),
    )
    .unwrap();
    assert_eq!(ok(&server, &["apply", "-f", applied]), "pod/applied configured\n");
    assert!(ok(&server, &["get", "pod", "applied", "--show-labels"]).contains("app=changed"));

    // Server-side apply: create, then update (the step that answered 415 before).
    let ssa = dir.join("ssa.yaml");
    std::fs::write(&ssa, POD.replace("nginx-pod", "ssa")).unwrap();
    let ssa = ssa.to_str().unwrap();
    assert_eq!(ok(&server, &["apply", "--server-side", "-f", ssa]), "pod/ssa serverside-applied\n");
    std::fs::write(ssa, POD.replace("nginx-pod", "ssa").replace("app: nginx", "app: moved"))
        .unwrap();
    assert_eq!(ok(&server, &["apply", "--server-side", "-f", ssa]), "pod/ssa serverside-applied\n");
    assert!(ok(&server, &["get", "pod", "ssa", "--show-labels"]).contains("app=moved"));

    // The generators, which send protobuf.
    assert_eq!(
        ok(&server, &["create", "deployment", "web", "--image=nginx:1.8"]),
        "deployment.apps/web created\n"
    );
    let deploys = ok(&server, &["get", "deployments"]);
    assert_eq!(
        deploys.lines().next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
    assert_eq!(
        ok(&server, &["scale", "deployment", "web", "--replicas=3"]),
        "deployment.apps/web scaled\n"
    );
    assert_eq!(ok(&server, &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]), "3");
    assert_eq!(ok(&server, &["create", "namespace", "team"]), "namespace/team created\n");
    assert_eq!(
        ok(&server, &["create", "configmap", "cfg", "--from-literal=a=1"]),
        "configmap/cfg created\n"
    );
    assert_eq!(
        ok(&server, &["create", "secret", "generic", "s", "--from-literal=p=x"]),
        "secret/s created\n"
    );
    assert_eq!(ok(&server, &["get", "secret", "s", "-o", "jsonpath={.data.p}"]), "eA==");

    // Deletion returns promptly.
    let started = Instant::now();
    assert_eq!(
        ok(&server, &["delete", "pod", "nginx-pod"]),
        "pod \"nginx-pod\" deleted from default namespace\n"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(
        ok(&server, &["delete", "deployment", "web"]),
        "deployment.apps \"web\" deleted from default namespace\n"
    );
    assert_eq!(ok(&server, &["delete", "namespace", "team"]), "namespace \"team\" deleted\n");
}

#[test]
fn auth_can_i_and_whoami_answer_from_the_authorizer_that_guards_requests() {
    let server = ApiServer::start_for_nodes(&["node-a"]).unwrap();
    let node = server.node_kubeconfig("node-a").unwrap();
    let as_node = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", node.to_str().unwrap()];
        all.extend_from_slice(args);
        k(&server, &all)
    };

    // The admin (system:masters) may do anything; kubectl sends these reviews as protobuf.
    assert_eq!(ok(&server, &["auth", "can-i", "create", "pods"]), "yes\n");
    assert_eq!(ok(&server, &["auth", "can-i", "delete", "deployments.apps", "-A"]), "yes\n");
    let me = ok(&server, &["auth", "whoami"]);
    assert!(me.contains("Username") && me.contains("admin"), "{me}");
    assert!(me.contains("system:masters"), "{me}");

    // A node (the Node authorizer) reads one object at a time, only what its pods reference
    // and its own Node, with upstream's reasons; its writes are NodeRestriction's to narrow.
    let r = as_node(&["auth", "can-i", "get", "pods", "-A"]);
    assert_eq!((r.ok, r.out.as_str()), (false, "no - No Object name found\n"), "{}", r.err);
    let r = as_node(&["auth", "can-i", "update", "nodes/node-a"]);
    assert_eq!((r.ok, r.out.as_str()), (true, "yes\n"), "{}", r.err);
    let r = as_node(&["auth", "can-i", "get", "nodes/node-b"]);
    assert_eq!(
        (r.ok, r.out.as_str()),
        (false, "no - node 'node-a' cannot read 'node-b', only its own Node object\n"),
        "{}",
        r.err
    );
    let r = as_node(&["auth", "can-i", "create", "secrets"]);
    assert!(!r.ok && r.out.starts_with("no"), "{}", r.out);
    // The answer matches what the real request gets.
    let r = as_node(&["create", "secret", "generic", "s", "--from-literal=a=b"]);
    assert!(!r.ok && r.err.contains("secrets is forbidden"), "{}", r.err);
    let r = as_node(&["auth", "whoami"]);
    assert!(
        r.ok && r.out.contains("system:node:node-a") && r.out.contains("system:nodes"),
        "{}",
        r.out
    );

    // `--list` (SelfSubjectRulesReview, protobuf): the chain's rules, as rows of resources,
    // non-resource URLs, names and verbs: the admin's from cluster-admin, a node's from RBAC
    // (what every authenticated user holds), marked incomplete by the Node authorizer, which
    // cannot list its rules (upstream's words).
    let rows = |out: &str| -> Vec<String> {
        out.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect()
    };
    let admin = rows(&ok(&server, &["auth", "can-i", "--list"]));
    assert_eq!(admin[0], "Resources Non-Resource URLs Resource Names Verbs", "{admin:?}");
    assert!(admin.contains(&"*.* [] [] [*]".to_string()), "{admin:?}");
    assert!(admin.contains(&"[*] [] [*]".to_string()), "{admin:?}");
    let r = as_node(&["auth", "can-i", "--list", "-n", "kube-node-lease"]);
    assert!(r.ok, "{}", r.err);
    let listed = rows(&r.out);
    for row in [
        "selfsubjectaccessreviews.authorization.k8s.io [] [] [create]",
        "selfsubjectrulesreviews.authorization.k8s.io [] [] [create]",
        "[/api/*] [] [get]",
        "[/version] [] [get]",
    ] {
        assert!(listed.contains(&row.to_string()), "{row:?} missing from {listed:#?}");
    }
    assert!(
        r.err.contains(
            "Warning: the list may be incomplete: node authorizer does not support user rule resolution"
        ),
        "{}",
        r.err
    );
    // Asking is itself allowed, and can-i says so.
    let r = as_node(&["auth", "can-i", "create", "selfsubjectrulesreviews.authorization.k8s.io"]);
    assert_eq!((r.ok, r.out.as_str()), (true, "yes\n"), "{}", r.err);

    // A type the server does not serve: kubectl warns, and the rules answer (no rule grants
    // it to a node).
    let r = as_node(&["auth", "can-i", "create", "widgets.example.com"]);
    assert_eq!((r.ok, r.out.as_str()), (false, "no\n"), "{}", r.err);
}
