#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use api::secret::*;
use api::validation::config::secret_data as data;
use k8s_openapi::ByteString;

use super::*;

fn secret(type_: &str, data: &[(&str, &[u8])]) -> Secret {
    Secret {
        type_: Some(type_.into()),
        data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.to_vec()))).collect()),
        ..Default::default()
    }
}

fn messages(errs: &ErrorList) -> Vec<String> {
    errs.0.iter().map(ToString::to_string).collect()
}

#[test]
fn string_data_is_merged_into_data_and_wins_over_it() {
    let mut s = secret("Opaque", &[("user", b"old"), ("keep", b"k")]);
    s.string_data = Some(BTreeMap::from([
        ("user".to_string(), "admin".to_string()),
        ("pass".to_string(), "s3cret".to_string()),
    ]));
    merge_string_data(&mut s);
    assert_eq!(s.string_data, None);
    assert_eq!(
        data(&s),
        BTreeMap::from([("keep", &b"k"[..]), ("pass", b"s3cret"), ("user", b"admin")])
    );
    let mut only_strings = Secret {
        string_data: Some(BTreeMap::from([("a".to_string(), "b".to_string())])),
        ..Default::default()
    };
    merge_string_data(&mut only_strings);
    assert_eq!(data(&only_strings), BTreeMap::from([("a", &b"b"[..])]));
    let mut empty = Secret { string_data: Some(BTreeMap::new()), ..Default::default() };
    merge_string_data(&mut empty);
    assert_eq!((empty.string_data, empty.data), (None, None));
}

#[test]
fn the_type_defaults_to_opaque() {
    let mut s = Secret::default();
    default_secret(&mut s);
    assert_eq!(s.type_.as_deref(), Some("Opaque"));
    let mut tls = secret(TYPE_TLS, &[]);
    default_secret(&mut tls);
    assert_eq!(tls.type_.as_deref(), Some(TYPE_TLS));
}

#[test]
fn keys_must_be_config_keys_and_data_at_most_one_mebibyte() {
    assert!(validate(&secret("Opaque", &[("a.b-c_D", b"x")])).is_empty());
    assert_eq!(
        messages(&validate(&secret("Opaque", &[("..", b"x")]))),
        ["data[..]: Invalid value: \"..\": must not be '..'"]
    );
    let full = vec![0u8; MAX_SIZE];
    assert!(validate(&secret("Opaque", &[("a", &full)])).is_empty());
    assert_eq!(
        messages(&validate(&secret("Opaque", &[("a", &full), ("b", b"!")]))),
        ["data: Too long: must have at most 1048576 bytes"]
    );
}

#[test]
fn each_type_requires_its_keys_with_upstreams_paths() {
    type Case<'a> = (&'a str, &'a [(&'a str, &'a [u8])], &'a [&'a str]);
    let cases: [Case<'_>; 9] = [
        (
            TYPE_SERVICE_ACCOUNT_TOKEN,
            &[],
            &["metadata.annotations[kubernetes.io/service-account.name]: Required value"],
        ),
        (TYPE_DOCKERCFG, &[], &["data[.dockercfg]: Required value"]),
        (TYPE_DOCKER_CONFIG_JSON, &[], &["data[.dockerconfigjson]: Required value"]),
        (
            TYPE_BASIC_AUTH,
            &[],
            &["data[username]: Required value", "data[password]: Required value"],
        ),
        (TYPE_BASIC_AUTH, &[("password", b"")], &[]),
        (TYPE_SSH_AUTH, &[("ssh-privatekey", b"")], &["data[ssh-privatekey]: Required value"]),
        (TYPE_TLS, &[("tls.crt", b"c")], &["data[tls.key]: Required value"]),
        (TYPE_TLS, &[("tls.crt", b"c"), ("tls.key", b"k")], &[]),
        ("example.com/my-own", &[], &[]),
    ];
    for (type_, data, want) in cases {
        assert_eq!(messages(&validate(&secret(type_, data))), want, "{type_} {data:?}");
    }
    let mut token = secret(TYPE_SERVICE_ACCOUNT_TOKEN, &[]);
    token.metadata.annotations =
        Some(BTreeMap::from([(SERVICE_ACCOUNT_NAME.to_string(), "default".to_string())]));
    assert!(validate(&token).is_empty());
}

#[test]
fn registry_credentials_must_be_a_json_object_said_as_go_says_it() {
    let good = br#"{"auths": {"r.example.com": {"auth": "YTpi"}}}"#;
    assert!(validate(&secret(TYPE_DOCKER_CONFIG_JSON, &[(".dockerconfigjson", good)])).is_empty());
    assert!(validate(&secret(TYPE_DOCKERCFG, &[(".dockercfg", b"{}")])).is_empty());
    assert_eq!(
        messages(&validate(&secret(
            TYPE_DOCKER_CONFIG_JSON,
            &[(".dockerconfigjson", b"not json")]
        ))),
        [
            "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": invalid character 'o' in literal null (expecting 'u')"
        ]
    );
    assert_eq!(
        messages(&validate(&secret(TYPE_DOCKERCFG, &[(".dockercfg", b"[]")]))),
        [
            "data[.dockercfg]: Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}"
        ]
    );
}

#[test]
fn the_type_never_changes_and_an_immutable_secret_keeps_its_data() {
    let old = secret("Opaque", &[("a", b"1")]);
    let retyped = secret(TYPE_BASIC_AUTH, &[("a", b"1"), ("username", b"u")]);
    assert_eq!(
        messages(&validate_update(&retyped, &old)),
        ["type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable"]
    );
    assert!(validate_update(&secret("Opaque", &[("a", b"2")]), &old).is_empty());

    let mut frozen = old.clone();
    frozen.immutable = Some(true);
    let mut relabelled = frozen.clone();
    relabelled.metadata.labels = Some(BTreeMap::from([("l".to_string(), "v".to_string())]));
    assert!(validate_update(&relabelled, &frozen).is_empty());
    let mut changed = secret("Opaque", &[("a", b"2")]);
    changed.immutable = Some(true);
    assert_eq!(
        messages(&validate_update(&changed, &frozen)),
        ["data: Forbidden: field is immutable when `immutable` is set"]
    );
    let mut thawed = frozen.clone();
    thawed.immutable = Some(false);
    assert_eq!(
        messages(&validate_update(&thawed, &frozen)),
        ["immutable: Forbidden: field is immutable when `immutable` is set"]
    );
    // stringData that writes what is there already changes nothing.
    let mut rewritten = frozen.clone();
    rewritten.string_data = Some(BTreeMap::from([("a".to_string(), "1".to_string())]));
    merge_string_data(&mut rewritten);
    assert!(validate_update(&rewritten, &frozen).is_empty());
}
