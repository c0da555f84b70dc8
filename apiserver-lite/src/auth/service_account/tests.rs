#![allow(clippy::unwrap_used)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::*;
use crate::serviceaccount::claims::{Bound, Issue, Ref};
use crate::serviceaccount::keys::SigningKey;
use crate::serviceaccount::token_request::tests::{ISSUER, NOW, issuer, objects, request};
use crate::serviceaccount::{Issuer, fake::FakeObjects, token_request};

fn authenticator(
    issuer: &Issuer,
    objects: FakeObjects,
) -> (ServiceAccountTokens, Arc<FakeObjects>) {
    let objects = Arc::new(objects);
    let tokens = ServiceAccountTokens {
        issuers: vec![ISSUER.into()],
        keys: vec![issuer.key.public().clone()],
        api_audiences: vec![ISSUER.into()],
        objects: objects.clone(),
    };
    (tokens, objects)
}

fn token(issuer: &Issuer, objects: &FakeObjects, spec: serde_json::Value) -> String {
    let (answer, _) =
        token_request::create(issuer, objects, "ns", "default", request(spec), NOW, "jti-1".into())
            .unwrap();
    answer.status.unwrap().token
}

fn pod_bound() -> serde_json::Value {
    json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web"}})
}

#[test]
fn a_pod_bound_token_is_its_service_account_with_the_pod_and_node_as_extra() {
    let issuer = issuer();
    let t = token(&issuer, &objects(), pod_bound());
    let (authn, _) = authenticator(&issuer, objects());
    let got = authn.authenticate(&t, None, NOW + 10).unwrap().unwrap();
    assert_eq!(got.audiences, [ISSUER]);
    let u = got.user;
    assert_eq!(u.name, "system:serviceaccount:ns:default");
    assert_eq!(u.uid, "sa-1");
    assert_eq!(
        u.groups,
        ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"]
    );
    let extra: Vec<(&str, &str)> =
        u.extra.iter().map(|(k, v)| (k.as_str(), v[0].as_str())).collect();
    assert_eq!(
        extra,
        [
            ("authentication.kubernetes.io/credential-id", "JTI=jti-1"),
            ("authentication.kubernetes.io/node-name", "n1"),
            ("authentication.kubernetes.io/node-uid", "node-1"),
            ("authentication.kubernetes.io/pod-name", "web"),
            ("authentication.kubernetes.io/pod-uid", "pod-1"),
        ]
    );
}

#[test]
fn expired_tokens_are_refused_after_a_minute_of_leeway() {
    let issuer = issuer();
    let t = token(&issuer, &objects(), json!({"expirationSeconds": 600}));
    let (authn, _) = authenticator(&issuer, objects());
    assert!(authn.authenticate(&t, None, NOW + 660).unwrap().is_some());
    let err = authn.authenticate(&t, None, NOW + 661).unwrap_err();
    assert_eq!(err.to_string(), "service account token has expired");
    let err = authn.authenticate(&t, None, NOW - 120).unwrap_err();
    assert_eq!(err.to_string(), "service account token is not valid yet");
}

#[test]
fn a_token_for_another_audience_is_refused_unless_that_audience_is_asked() {
    let issuer = issuer();
    let t = token(&issuer, &objects(), json!({"audiences": ["vault", "x"]}));
    let (authn, _) = authenticator(&issuer, objects());
    let err = authn.authenticate(&t, None, NOW).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "token audiences [\"vault\" \"x\"] is invalid for the target audiences [\"{ISSUER}\"]"
        )
    );
    let asked = ["x".to_string()];
    assert_eq!(authn.authenticate(&t, Some(&asked), NOW).unwrap().unwrap().audiences, ["x"]);
}

#[test]
fn a_token_signed_by_another_key_or_from_another_issuer_is_not_ours() {
    let issuer_a = issuer();
    let t = token(&issuer_a, &objects(), json!({}));
    let issuer_b = Issuer { key: SigningKey::generate().unwrap().0, ..issuer() };
    let (authn, _) = authenticator(&issuer_b, objects());
    assert_eq!(
        authn.authenticate(&t, None, NOW).unwrap_err().to_string(),
        "invalid signature, no keys found"
    );
    // Same key id, other key: the signature decides.
    let mut forged = authn.clone();
    forged.keys[0].kid = issuer_a.key.public().kid.clone();
    assert_eq!(
        forged.authenticate(&t, None, NOW).unwrap_err(),
        TokenError::Jwt(JwtError::Signature)
    );
    let elsewhere = Issuer { issuer: "https://elsewhere".into(), ..issuer() };
    let t = token(&elsewhere, &objects(), json!({}));
    let (authn, _) = authenticator(&elsewhere, objects());
    assert_eq!(
        authn.authenticate(&t, None, NOW).unwrap(),
        None,
        "another issuer's token is left to others"
    );
    assert_eq!(authn.authenticate("not-a-jwt", None, NOW).unwrap(), None);
}

#[test]
fn a_token_dies_with_its_pod_secret_or_service_account() {
    let issuer = issuer();
    let bound = token(&issuer, &objects(), pod_bound());
    let (authn, objs) = authenticator(&issuer, objects());
    objs.remove_pod("ns", "web");
    assert_eq!(authn.authenticate(&bound, None, NOW).unwrap_err(), TokenError::Invalidated);
    // A pod of the same name, made again, has another UID.
    let mut again = objects().pod("ns", "web").unwrap();
    again.metadata.uid = Some("pod-2".into());
    objs.put_pod(again.clone());
    assert_eq!(
        authn.authenticate(&bound, None, NOW).unwrap_err().to_string(),
        "pod UID (pod-2) does not match service account pod ref claim (pod-1)"
    );
    // A pod being deleted is good until a minute after its deletion time.
    again.metadata.uid = Some("pod-1".into());
    again.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::from_second(NOW).unwrap()));
    objs.put_pod(again);
    assert!(authn.authenticate(&bound, None, NOW + 60).unwrap().is_some());
    assert_eq!(authn.authenticate(&bound, None, NOW + 61).unwrap_err(), TokenError::Invalidated);

    let (secret_token, (authn, objs)) = (
        token(
            &issuer,
            &objects(),
            json!({"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "s"}}),
        ),
        authenticator(&issuer, objects()),
    );
    assert!(authn.authenticate(&secret_token, None, NOW).unwrap().is_some());
    objs.put_secret(k8s_openapi::api::core::v1::Secret {
        metadata: crate::serviceaccount::fake::meta("ns", "s", "sec-2"),
        ..Default::default()
    });
    assert!(matches!(
        authn.authenticate(&secret_token, None, NOW),
        Err(TokenError::BoundUid { kind: "secret", .. })
    ));

    let plain = token(&issuer, &objects(), json!({}));
    objs.remove_account("ns", "default");
    assert_eq!(
        authn.authenticate(&plain, None, NOW).unwrap_err().to_string(),
        "serviceaccounts \"default\" not found"
    );
}

#[test]
fn a_node_bound_token_needs_its_node() {
    let issuer = issuer();
    let claims = Claims::new(Issue {
        issuer: ISSUER.into(),
        namespace: "ns".into(),
        service_account: Ref::new("default", "sa-1"),
        bound: Some(Bound::Node(Ref::new("n1", "node-0"))),
        audiences: vec![ISSUER.into()],
        now: NOW,
        expiration_seconds: 600,
        warn_after_seconds: None,
        jti: String::new(),
    });
    let t = jwt::sign(&issuer.key, &claims).unwrap();
    let (authn, _) = authenticator(&issuer, objects());
    assert_eq!(
        authn.authenticate(&t, None, NOW).unwrap_err().to_string(),
        "node UID (node-1) does not match service account node ref claim (node-0)"
    );
}
