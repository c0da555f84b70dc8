//! Secrets and ConfigMaps through the registry, as upstream's strategies keep them: `stringData`
//! is merged into `data` and never stored, whether it comes in a create, an update, a patch or a
//! protobuf body; bad keys, oversized data, a changed type and changes to immutable objects are
//! 422s with upstream's paths, and leave what is stored alone.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use apiserver_lite::objects::FieldValidation;
use apiserver_lite::patch::{self, PatchType};
use apiserver_lite::registry::{Registry, WriteOptions};
use apiserver_lite::resources::{ResourceType, find};
use apiserver_lite::storage::Store;
use apiserver_lite::storage::sqlite::SqliteBackend;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use prost::Message;
use serde_json::{Value, json};

const W: WriteOptions = WriteOptions { dry_run: false, validation: FieldValidation::Strict };
const NS: Option<&str> = Some("default");

fn secrets() -> &'static ResourceType {
    find("", "v1", "secrets").unwrap()
}

fn config_maps() -> &'static ResourceType {
    find("", "v1", "configmaps").unwrap()
}

async fn registry(dir: &std::path::Path) -> Arc<Registry> {
    let store = Store::open(Arc::new(SqliteBackend::open(&dir.join("db")).unwrap())).unwrap();
    let r = Arc::new(Registry::new(Arc::new(store)));
    r.bootstrap().await.unwrap();
    r
}

fn b64(s: &str) -> String {
    STANDARD.encode(s)
}

/// What the store holds for the Secret, as a reader gets it.
fn stored(r: &Registry, name: &str) -> Value {
    r.get(secrets(), NS, name).unwrap()
}

#[tokio::test]
async fn string_data_is_merged_into_data_on_every_write_path_and_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;

    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
        "data": {"user": b64("old"), "keep": b64("k")},
        "stringData": {"user": "admin", "pass": "s3cret"}});
    let (created, _) = r.create(secrets(), NS, body, W).await.unwrap();
    let want = json!({"keep": b64("k"), "pass": b64("s3cret"), "user": b64("admin")});
    assert_eq!(created["data"], want);
    assert_eq!(created["type"], "Opaque");
    assert!(created.get("stringData").is_none(), "{created}");
    assert_eq!(stored(&r, "db")["data"], want);
    assert!(stored(&r, "db").get("stringData").is_none());

    // An update (PUT) with stringData.
    let mut put = stored(&r, "db");
    put["stringData"] = json!({"pass": "rotated"});
    let (updated, _) = r.update(secrets(), NS, "db", None, put, W).await.unwrap();
    assert_eq!(updated["data"]["pass"], b64("rotated"));
    assert!(stored(&r, "db").get("stringData").is_none());

    // Merge and strategic merge patches with stringData (kubectl patch, kubectl apply).
    for (kind, value) in [(PatchType::Merge, "merged"), (PatchType::Strategic, "strategic")] {
        let p = json!({"stringData": {"pass": value}});
        r.update_with(secrets(), NS, "db", None, W, |old| patch::apply(kind, old, &p))
            .await
            .unwrap();
        let now = stored(&r, "db");
        assert_eq!(now["data"]["pass"], b64(value), "{kind:?}");
        assert!(now.get("stringData").is_none(), "{kind:?}: {now}");
    }

    // A protobuf body, as `kubectl create secret generic --from-literal` sends it.
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    let s = core::Secret {
        metadata: Some(meta::ObjectMeta { name: Some("pb".into()), ..Default::default() }),
        string_data: [("token".to_string(), "t0k".to_string())].into(),
        r#type: Some(String::new()),
        ..Default::default()
    };
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("Secret".into()),
        }),
        raw: Some(s.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let body =
        apiserver_lite::protobuf::decode(&[b"k8s\0".to_vec(), unknown.encode_to_vec()].concat())
            .unwrap();
    r.create(secrets(), NS, body, W).await.unwrap();
    assert_eq!(stored(&r, "pb")["data"], json!({"token": b64("t0k")}));
    assert!(stored(&r, "pb").get("stringData").is_none());
    assert_eq!(stored(&r, "pb")["type"], "Opaque");
}

#[tokio::test]
async fn bad_secrets_are_422_with_upstreams_paths_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;
    let secret = |name: &str, type_: &str, data: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": type_, "data": data});
    let cases = [
        (
            secret(
                "json",
                "kubernetes.io/dockerconfigjson",
                json!({".dockerconfigjson": b64("{")}),
            ),
            "Secret \"json\" is invalid: data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": unexpected end of JSON input",
        ),
        (
            secret("tls", "kubernetes.io/tls", json!({})),
            "Secret \"tls\" is invalid: [data[tls.crt]: Required value, data[tls.key]: Required value]",
        ),
        (
            secret("key", "Opaque", json!({"a/b": b64("x")})),
            "Secret \"key\" is invalid: data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"},
                   "stringData": {"a": "x".repeat(1024 * 1024 + 1)}}),
            "Secret \"big\" is invalid: data: Too long: must have at most 1048576 bytes",
        ),
    ];
    for (body, message) in cases {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        let err = r.create(secrets(), NS, body, W).await.unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (422, message));
        assert!(r.get(secrets(), NS, &name).is_err(), "{name} must not be stored");
    }
    // The invalid-field causes carry the path, for kubectl and clients.
    let err = r
        .create(secrets(), NS, secret("ssh", "kubernetes.io/ssh-auth", json!({})), W)
        .await
        .unwrap_err();
    let status = err.status();
    assert_eq!(status["details"]["causes"][0]["field"], "data[ssh-privatekey]", "{status}");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueRequired", "{status}");
}

#[tokio::test]
async fn a_secrets_type_is_fixed_and_an_immutable_one_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                      "immutable": true, "stringData": {"a": "1"}});
    r.create(secrets(), NS, body, W).await.unwrap();
    let before = stored(&r, "s");

    let retype = json!({"type": "kubernetes.io/basic-auth", "stringData": {"username": "u"}});
    let err = r
        .update_with(secrets(), NS, "s", None, W, |old| {
            patch::apply(PatchType::Merge, old, &retype)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable"),
        "{}",
        err.message
    );
    for p in [json!({"stringData": {"a": "2"}}), json!({"data": {"b": b64("2")}})] {
        let err = r
            .update_with(secrets(), NS, "s", None, W, |old| patch::apply(PatchType::Merge, old, &p))
            .await
            .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                422,
                "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
            ),
        );
    }
    let thaw = json!({"immutable": false});
    let err = r
        .update_with(secrets(), NS, "s", None, W, |old| patch::apply(PatchType::Merge, old, &thaw))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Secret \"s\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set"
    );
    assert_eq!(stored(&r, "s"), before, "refused writes leave the Secret alone");
    // Labels may still change.
    let label = json!({"metadata": {"labels": {"tier": "db"}}});
    r.update_with(secrets(), NS, "s", None, W, |old| patch::apply(PatchType::Merge, old, &label))
        .await
        .unwrap();
}

#[tokio::test]
async fn config_maps_keep_valid_keys_a_size_limit_and_immutability() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(dir.path()).await;
    let cm = |name: &str, data: Value, binary: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data, "binaryData": binary});
    let cases = [
        (
            cm("dots", json!({"..data": "x"}), json!({})),
            "ConfigMap \"dots\" is invalid: data[..data]: Invalid value: \"..data\": must not start with '..'",
        ),
        (
            cm("dup", json!({"k": "x"}), json!({"k": b64("y")})),
            "ConfigMap \"dup\" is invalid: data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
        ),
        (
            cm(
                "big",
                json!({"a": "x".repeat(600_000)}),
                json!({"b": STANDARD.encode(vec![0u8; 600_000])}),
            ),
            "ConfigMap \"big\" is invalid: : Too long: must have at most 1048576 bytes",
        ),
    ];
    for (body, message) in cases {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        let err = r.create(config_maps(), NS, body, W).await.unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (422, message));
        assert!(r.get(config_maps(), NS, &name).is_err(), "{name} must not be stored");
    }

    let mut frozen = cm("app", json!({"app.conf": "v1"}), json!({}));
    frozen["immutable"] = json!(true);
    r.create(config_maps(), NS, frozen, W).await.unwrap();
    let edit = json!({"data": {"app.conf": "v2"}, "binaryData": {"b": b64("x")}});
    let err = r
        .update_with(config_maps(), NS, "app", None, W, |old| {
            patch::apply(PatchType::Merge, old, &edit)
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            422,
            "ConfigMap \"app\" is invalid: [data: Forbidden: field is immutable when `immutable` is set, binaryData: Forbidden: field is immutable when `immutable` is set]"
        )
    );
    assert_eq!(r.get(config_maps(), NS, "app").unwrap()["data"]["app.conf"], "v1");
}
