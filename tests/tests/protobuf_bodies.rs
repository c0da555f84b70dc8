//! Protobuf request bodies from the real kubectl: the `create` subcommands that use typed
//! clients send `application/vnd.kubernetes.protobuf`, and apiserver-lite reads them.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use e2e::apiserver::{ApiServer, KubectlRun};

fn ok(server: &ApiServer, args: &[&str]) -> KubectlRun {
    let r = server.kubectl_run(args).unwrap();
    assert!(
        r.ok,
        "kubectl {args:?} failed:\n{}\n{}\napiserver log:\n{}",
        r.out,
        r.err,
        server.log_tail(15)
    );
    r
}

#[test]
fn kubectl_create_serviceaccount_sends_protobuf_and_the_account_is_stored() {
    let server = ApiServer::start().unwrap();

    // `-v=8` logs the request headers: the body really is protobuf.
    let created = ok(&server, &["create", "serviceaccount", "build-bot", "-v=8"]);
    assert!(created.out.contains("serviceaccount/build-bot created"), "{}", created.out);
    assert!(
        created.err.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl did not send protobuf:\n{}",
        created.err
    );

    let got: serde_json::Value =
        serde_json::from_str(&ok(&server, &["get", "sa", "build-bot", "-o", "json"]).out).unwrap();
    assert_eq!(
        (got["apiVersion"].as_str(), got["kind"].as_str()),
        (Some("v1"), Some("ServiceAccount"))
    );
    assert_eq!(got["metadata"]["name"], "build-bot");
    assert_eq!(got["metadata"]["namespace"], "default");
    assert!(got["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()), "{got}");

    // In another namespace, and a second create of the same name is refused (kubectl words it
    // `failed to create serviceaccount: <the server's message>`).
    ok(&server, &["create", "namespace", "ci"]);
    ok(&server, &["create", "serviceaccount", "build-bot", "-n", "ci"]);
    ok(&server, &["get", "serviceaccount", "build-bot", "-n", "ci"]);
    let again = server.kubectl_run(&["create", "serviceaccount", "build-bot"]).unwrap();
    assert!(
        !again.ok
            && again.err.contains(
                "failed to create serviceaccount: serviceaccounts \"build-bot\" already exists"
            ),
        "{}",
        again.err
    );
}
