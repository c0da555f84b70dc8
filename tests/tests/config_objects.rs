//! Secrets and ConfigMaps through the real kubectl v1.35 against apiserver-lite: a Secret
//! applied from YAML with `stringData` reads back with that content in `data` and no
//! `stringData` (also after a second apply changes it); every bad input of upstream's rules is
//! a 422 naming the field, and leaves the object as it was.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use base64::Engine;
use e2e::apiserver::{ApiServer, KubectlRun as Run};
use serde_json::Value;

fn k(server: &ApiServer, args: &[&str]) -> Run {
    server.kubectl_run(args).unwrap()
}

/// Writes `yaml` to a file and runs `kubectl <verb> -f` on it.
fn with_file(server: &ApiServer, verb: &str, name: &str, yaml: &str, extra: &[&str]) -> Run {
    let file = server.dir().join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let mut args = vec![verb, "-f", file.to_str().unwrap()];
    args.extend(extra);
    k(server, &args)
}

fn applied(server: &ApiServer, name: &str, yaml: &str) {
    let r = with_file(server, "apply", name, yaml, &[]);
    assert!(r.ok, "kubectl apply {name}: {}\n{}\n{}", r.out, r.err, server.log_tail(10));
}

/// `kubectl <verb> -f` of `yaml` is refused with 422 and a message naming `field`.
fn refused(server: &ApiServer, verb: &str, name: &str, yaml: &str, field: &str) {
    let r = with_file(server, verb, name, yaml, &["--v=6"]);
    assert!(!r.ok, "{name} was accepted: {}", r.out);
    assert!(r.err.contains("422 Unprocessable Entity"), "{name}: no 422 in:\n{}", r.err);
    assert!(r.err.contains("is invalid: "), "{name}: {}", r.err);
    assert!(r.err.contains(field), "{name}: {field:?} not in:\n{}", r.err);
}

fn get_json(server: &ApiServer, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend(what);
    args.extend(["-o", "json"]);
    let r = k(server, &args);
    assert!(r.ok, "kubectl get {what:?}: {}", r.err);
    serde_json::from_str(&r.out).unwrap()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

const DB_SECRET: &str = "apiVersion: v1
kind: Secret
metadata:
  name: db
type: Opaque
data:
  user: b2xk
stringData:
  user: admin
  password: s3cret
";

#[test]
fn secrets_and_config_maps_through_kubectl_keep_upstreams_rules() {
    let server = ApiServer::start().unwrap();

    // stringData lands in data (winning over data's own value) and is never returned.
    applied(&server, "db", DB_SECRET);
    let got = get_json(&server, &["secret", "db"]);
    assert_eq!(got["data"]["user"], b64("admin"), "{got}");
    assert_eq!(got["data"]["password"], b64("s3cret"), "{got}");
    assert!(got.get("stringData").is_none(), "{got}");
    assert_eq!(got["type"], "Opaque");
    // A second apply that changes stringData changes data (kubectl's patch path).
    applied(&server, "db", &DB_SECRET.replace("password: s3cret", "password: rotated"));
    let got = get_json(&server, &["secret", "db"]);
    assert_eq!(got["data"]["password"], b64("rotated"), "{got}");
    assert!(got.get("stringData").is_none(), "{got}");

    // Type rules, with upstream's field paths.
    let secret = |name: &str, type_: &str, body: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\ntype: {type_}\n{body}")
    };
    let cases = [
        (
            "not-json",
            "kubernetes.io/dockerconfigjson",
            "stringData:\n  .dockerconfigjson: '{\"auths\": '\n",
            "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": unexpected end of JSON input",
        ),
        ("no-cfg", "kubernetes.io/dockercfg", "data: {}\n", "data[.dockercfg]: Required value"),
        (
            "tls",
            "kubernetes.io/tls",
            "stringData:\n  tls.crt: x\n",
            "data[tls.key]: Required value",
        ),
        (
            "ssh",
            "kubernetes.io/ssh-auth",
            "stringData:\n  other: x\n",
            "data[ssh-privatekey]: Required value",
        ),
        ("basic", "kubernetes.io/basic-auth", "data: {}\n", "data[username]: Required value"),
        (
            "token",
            "kubernetes.io/service-account-token",
            "data: {}\n",
            "metadata.annotations[kubernetes.io/service-account.name]: Required value",
        ),
        (
            "bad-key",
            "Opaque",
            "stringData:\n  a b: x\n",
            "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters",
        ),
        (
            "dots",
            "Opaque",
            "stringData:\n  ..data: x\n",
            "data[..data]: Invalid value: \"..data\": must not start with '..'",
        ),
    ];
    for (name, type_, body, field) in cases {
        refused(&server, "apply", name, &secret(name, type_, body), field);
        assert!(!k(&server, &["get", "secret", name]).ok, "{name} must not exist");
    }
    let big = format!("stringData:\n  a: {}\n", "x".repeat(1024 * 1024 + 1));
    refused(
        &server,
        "create",
        "big",
        &secret("big", "Opaque", &big),
        "data: Too long: must have at most 1048576 bytes",
    );

    // The type never changes; an immutable Secret keeps its data.
    refused(
        &server,
        "apply",
        "db",
        &DB_SECRET.replace("type: Opaque", "type: kubernetes.io/basic-auth"),
        "type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable",
    );
    let frozen = secret("frozen", "Opaque", "immutable: true\nstringData:\n  a: \"1\"\n");
    applied(&server, "frozen", &frozen);
    refused(
        &server,
        "apply",
        "frozen",
        &frozen.replace("a: \"1\"", "a: \"2\""),
        "data: Forbidden: field is immutable when `immutable` is set",
    );
    refused(
        &server,
        "apply",
        "frozen",
        &frozen.replace("immutable: true", "immutable: false"),
        "immutable: Forbidden: field is immutable when `immutable` is set",
    );
    assert_eq!(get_json(&server, &["secret", "frozen"])["data"]["a"], b64("1"));

    // ConfigMaps: keys, no key in both maps, 1 MiB, immutability.
    let cm = |name: &str, body: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{body}")
    };
    refused(
        &server,
        "apply",
        "cm-key",
        &cm("cm-key", "data:\n  a b: x\n"),
        "data[a b]: Invalid value: \"a b\"",
    );
    refused(
        &server,
        "apply",
        "cm-dot",
        &cm("cm-dot", "binaryData:\n  ..: eA==\n"),
        "binaryData[..]: Invalid value: \"..\": must not be '..'",
    );
    refused(
        &server,
        "apply",
        "cm-dup",
        &cm("cm-dup", "data:\n  k: x\nbinaryData:\n  k: eA==\n"),
        "data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
    );
    let big = format!("data:\n  a: {}\n", "x".repeat(1024 * 1024 + 1));
    refused(
        &server,
        "create",
        "cm-big",
        &cm("cm-big", &big),
        "is invalid: : Too long: must have at most 1048576 bytes",
    );
    let settings = cm("settings", "immutable: true\ndata:\n  app.conf: v1\n");
    applied(&server, "settings", &settings);
    refused(
        &server,
        "apply",
        "settings",
        &settings.replace("app.conf: v1", "app.conf: v2"),
        "data: Forbidden: field is immutable when `immutable` is set",
    );
    assert_eq!(get_json(&server, &["configmap", "settings"])["data"]["app.conf"], "v1");
}
