#![allow(clippy::unwrap_used)]

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Secret, ServiceAccount};
use serde_json::json;

use super::*;
use crate::serviceaccount::fake::{FakeObjects, meta};
use crate::serviceaccount::keys::SigningKey;

pub(crate) const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
pub(crate) const NOW: i64 = 1_800_000_000;

pub(crate) fn issuer() -> Issuer {
    Issuer {
        issuer: ISSUER.into(),
        api_audiences: vec![ISSUER.into()],
        key: SigningKey::generate().unwrap().0,
        extend_expiration: true,
        max_expiration_seconds: None,
    }
}

/// `ns/default` (uid sa-1) and `ns/robot`; the pod `ns/web` on node n1, running as default;
/// the secret `ns/s`; the node n1.
pub(crate) fn objects() -> FakeObjects {
    let o = FakeObjects::default();
    o.put_account(ServiceAccount { metadata: meta("ns", "default", "sa-1"), ..Default::default() });
    o.put_account(ServiceAccount { metadata: meta("ns", "robot", "sa-2"), ..Default::default() });
    o.put_pod(Pod {
        metadata: meta("ns", "web", "pod-1"),
        spec: Some(PodSpec {
            service_account_name: Some("default".into()),
            node_name: Some("n1".into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    o.put_secret(Secret { metadata: meta("ns", "s", "sec-1"), ..Default::default() });
    o.put_node(Node { metadata: meta("", "n1", "node-1"), ..Default::default() });
    o
}

pub(crate) fn request(spec: Value) -> TokenRequest {
    decode(
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
        FieldValidation::Strict,
    )
    .unwrap()
    .0
}

fn claims_of(token: &str) -> Claims {
    let parsed = crate::serviceaccount::jwt::Token::parse(token).unwrap();
    serde_json::from_slice(&parsed.payload).unwrap()
}

#[test]
fn a_request_without_options_gets_an_hour_for_the_apis_audience() {
    let (issuer, objects) = (issuer(), objects());
    let (answer, warnings) =
        create(&issuer, &objects, "ns", "default", request(json!({})), NOW, "j".into()).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(answer.spec.audiences, [ISSUER]);
    assert_eq!(answer.spec.expiration_seconds, Some(3600));
    assert_eq!(answer.metadata.uid.as_deref(), Some("sa-1"));
    let status = answer.status.unwrap();
    assert_eq!(status.expiration_timestamp.0.as_second(), NOW + 3600);
    let c = claims_of(&status.token);
    assert_eq!(
        (c.sub.as_str(), c.iss.as_str(), c.exp, c.jti.as_str()),
        ("system:serviceaccount:ns:default", ISSUER, Some(NOW + 3600), "j")
    );
    assert_eq!(c.kubernetes.serviceaccount, Ref::new("default", "sa-1"));
    assert_eq!((c.kubernetes.pod, c.kubernetes.warnafter), (None, None));
    let json = serde_json::to_value(
        create(
            &issuer,
            &objects,
            "ns",
            "default",
            request(json!({"audiences": ["x"]})),
            NOW,
            "j".into(),
        )
        .unwrap()
        .0,
    )
    .unwrap();
    assert_eq!(
        (json["kind"].as_str(), json["apiVersion"].as_str()),
        (Some("TokenRequest"), Some("authentication.k8s.io/v1"))
    );
    assert_eq!(json["spec"]["audiences"], json!(["x"]));
}

#[test]
fn a_pod_bound_token_names_the_pod_and_its_node_and_is_extended_at_3607_seconds() {
    let (issuer, objects) = (issuer(), objects());
    let bound = json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "pod-1"}, "expirationSeconds": 3607});
    let (answer, _) =
        create(&issuer, &objects, "ns", "default", request(bound.clone()), NOW, "j".into())
            .unwrap();
    let status = answer.status.unwrap();
    assert_eq!(status.expiration_timestamp.0.as_second(), NOW + 3607, "the status keeps the hour");
    let c = claims_of(&status.token);
    assert_eq!(c.kubernetes.pod, Some(Ref::new("web", "pod-1")));
    assert_eq!(c.kubernetes.node, Some(Ref::new("n1", "node-1")));
    assert_eq!((c.exp, c.kubernetes.warnafter), (Some(NOW + 365 * 24 * 3600), Some(NOW + 3607)));
    // Not extended: for another audience, another lifetime, or with the extension off.
    let other = json!({"boundObjectRef": bound["boundObjectRef"], "expirationSeconds": 3607, "audiences": ["vault"]});
    let c = claims_of(
        &create(&issuer, &objects, "ns", "default", request(other), NOW, "j".into())
            .unwrap()
            .0
            .status
            .unwrap()
            .token,
    );
    assert_eq!((c.exp, c.kubernetes.warnafter), (Some(NOW + 3607), None));
    let off = Issuer { extend_expiration: false, ..issuer };
    let c = claims_of(
        &create(&off, &objects, "ns", "default", request(bound), NOW, "j".into())
            .unwrap()
            .0
            .status
            .unwrap()
            .token,
    );
    assert_eq!(c.exp, Some(NOW + 3607));
}

#[test]
fn secret_and_node_bindings_name_their_object() {
    let (issuer, objects) = (issuer(), objects());
    let token = |spec: Value| {
        claims_of(
            &create(&issuer, &objects, "ns", "robot", request(spec), NOW, "j".into())
                .unwrap()
                .0
                .status
                .unwrap()
                .token,
        )
    };
    let c = token(json!({"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "s"}}));
    assert_eq!((c.kubernetes.secret, c.kubernetes.pod), (Some(Ref::new("s", "sec-1")), None));
    let c = token(
        json!({"boundObjectRef": {"kind": "Node", "apiVersion": "v1", "name": "n1", "uid": "node-1"}}),
    );
    assert_eq!(c.kubernetes.node, Some(Ref::new("n1", "node-1")));
}

#[test]
fn bad_requests_are_refused_in_upstreams_words() {
    let (issuer, objects) = (issuer(), objects());
    let err = |name: &str, spec: Value| {
        create(&issuer, &objects, "ns", name, request(spec), NOW, "j".into()).unwrap_err()
    };
    let e = err("default", json!({"expirationSeconds": 60}));
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            422,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        )
    );
    let e = err("default", json!({"expirationSeconds": 1_i64 << 33}));
    assert!(
        e.message.ends_with("may not specify a duration larger than 2^32 seconds"),
        "{}",
        e.message
    );
    let e = err("ghost", json!({}));
    assert_eq!((e.code, e.message.as_str()), (404, "serviceaccounts \"ghost\" not found"));
    let e = err(
        "default",
        json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "gone"}}),
    );
    assert_eq!((e.code, e.message.as_str()), (404, "pods \"gone\" not found"));
    let e =
        err("robot", json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web"}}));
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            400,
            "cannot bind token for serviceaccount \"robot\" to pod running with different serviceaccount name."
        )
    );
    let e = err(
        "default",
        json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "old"}}),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            409,
            "Operation cannot be fulfilled on Pod \"web\": the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated"
        )
    );
    let e = err(
        "default",
        json!({"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1", "name": "c"}}),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "cannot bind token to object of type /v1, Kind=ConfigMap")
    );
    let mut named = request(json!({}));
    named.metadata.name = Some("other".into());
    let e = create(&issuer, &objects, "ns", "default", named, NOW, "j".into()).unwrap_err();
    assert_eq!(
        e.message,
        "TokenRequest.authentication.k8s.io \"default\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified"
    );
    let e =
        decode(json!({"apiVersion": "v1", "kind": "Pod"}), FieldValidation::Strict).unwrap_err();
    assert_eq!(e.code, 400);
    let e = decode(json!({"spec": {"audience": ["x"]}}), FieldValidation::Strict).unwrap_err();
    assert!(e.message.contains("unknown field \"spec.audience\""), "{}", e.message);
}

#[test]
fn a_limit_shortens_longer_requests_with_a_warning() {
    let issuer = Issuer { max_expiration_seconds: Some(7200), ..issuer() };
    let (answer, warnings) = create(
        &issuer,
        &objects(),
        "ns",
        "default",
        request(json!({"expirationSeconds": 86400})),
        NOW,
        "j".into(),
    )
    .unwrap();
    assert_eq!(warnings, ["requested expiration of 86400 seconds shortened to 7200 seconds"]);
    assert_eq!(answer.spec.expiration_seconds, Some(7200));
    assert_eq!(claims_of(&answer.status.unwrap().token).exp, Some(NOW + 7200));
}
