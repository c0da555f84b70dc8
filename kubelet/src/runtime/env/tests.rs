use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::objects::fake::FakeObjects;

fn objects() -> ObjectSources {
    let fake = Arc::new(FakeObjects::default());
    fake.put_config_map(
        "ns",
        json!({"metadata": {"name": "settings"},
        "data": {"LOG_LEVEL": "debug", "MODE": "fast", "bad=key": "x", "also bad\u{1}": "y"}}),
    );
    fake.put_secret(
        "ns",
        json!({"metadata": {"name": "creds"},
        "data": {"PASSWORD": "aHVudGVyMg==", "USER": "YWRtaW4="}}),
    );
    ObjectSources { api: Some(fake), local: None }
}

fn pod(container: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [container]},
    }))
    .unwrap()
}

async fn env_of(
    pod: &Pod,
    objects: &ObjectSources,
    recorder: &Recorder,
) -> Result<Vec<(String, String)>, EnvError> {
    let ctx = EnvContext {
        pod,
        container: &pod.spec.as_ref().unwrap().containers[0],
        addresses: PodAddresses { pod_ip: Some("10.1.0.5"), host_ip: Some("192.0.2.1") },
        allocatable: Allocatable { cpu_millis: 2000, memory_bytes: 1 << 30 },
        objects,
        recorder,
    };
    Ok(environment(&ctx).await?.into_iter().map(|kv| (kv.key, kv.value)).collect())
}

#[tokio::test]
async fn key_refs_env_from_with_prefix_and_overrides_in_upstreams_order() {
    let p = pod(json!({"name": "app", "image": "x:1",
        "envFrom": [
            {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
            {"secretRef": {"name": "creds"}},
        ],
        "env": [
            {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LOG_LEVEL"}}},
            {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}},
            {"name": "USER", "value": "overridden"},
            {"name": "DSN", "value": "$(USER):$(PASS)@db?mode=$(CFG_MODE)"},
        ],
    }));
    let recorder = Recorder::default();
    let env = env_of(&p, &objects(), &recorder).await.unwrap();
    let map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(map["CFG_LOG_LEVEL"], "debug");
    assert_eq!(map["CFG_MODE"], "fast");
    assert_eq!(map["PASSWORD"], "hunter2");
    assert_eq!(map["LEVEL"], "debug");
    assert_eq!(map["PASS"], "hunter2");
    assert_eq!(map["USER"], "overridden", "env overrides envFrom");
    assert_eq!(map["DSN"], "overridden:hunter2@db?mode=fast");
    assert_eq!(env.iter().filter(|(k, _)| k == "USER").count(), 1);
    let events = recorder.list();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason, "InvalidEnvironmentVariableNames");
    assert_eq!(
        events[0].message,
        "Keys [CFG_also bad\u{1}, CFG_bad=key] from the EnvFrom configMap ns/settings were skipped since they are considered invalid environment variable names."
    );
    assert!(!map.contains_key("CFG_bad=key"));
}

#[tokio::test]
async fn a_missing_object_or_key_is_upstreams_error_unless_optional() {
    let objects = objects();
    let recorder = Recorder::default();
    let cases = [
        (json!({"configMapKeyRef": {"name": "nope", "key": "k"}}), "configmap \"nope\" not found"),
        (json!({"secretKeyRef": {"name": "nope", "key": "k"}}), "secret \"nope\" not found"),
        (
            json!({"configMapKeyRef": {"name": "settings", "key": "k"}}),
            "couldn't find key k in ConfigMap ns/settings",
        ),
        (
            json!({"secretKeyRef": {"name": "creds", "key": "k"}}),
            "couldn't find key k in Secret ns/creds",
        ),
    ];
    for (from, want) in cases {
        let p = pod(json!({"name": "app", "env": [{"name": "X", "valueFrom": from.clone()}]}));
        let err = env_of(&p, &objects, &recorder).await.unwrap_err();
        assert_eq!(err.to_string(), want);
        let mut optional = from.clone();
        let reference = optional.as_object_mut().unwrap().values_mut().next().unwrap();
        reference["optional"] = json!(true);
        let p = pod(json!({"name": "app", "env": [{"name": "X", "valueFrom": optional}]}));
        assert_eq!(env_of(&p, &objects, &recorder).await.unwrap(), [], "optional: skipped");
    }
    let p = pod(json!({"name": "app", "envFrom": [{"configMapRef": {"name": "nope"}}]}));
    assert_eq!(
        env_of(&p, &objects, &recorder).await.unwrap_err().to_string(),
        "configmap \"nope\" not found"
    );
    let p =
        pod(json!({"name": "app", "envFrom": [{"secretRef": {"name": "nope", "optional": true}}]}));
    assert_eq!(env_of(&p, &objects, &recorder).await.unwrap(), []);
}

#[tokio::test]
async fn a_static_pod_reads_node_local_objects_never_api_ones() {
    let mut p = pod(json!({"name": "app", "envFrom": [{"configMapRef": {"name": "settings"}}]}));
    p.metadata.annotations = Some([(api::keys::CONFIG_SOURCE.into(), "file".into())].into());
    let err = env_of(&p, &objects(), &Recorder::default()).await.unwrap_err();
    assert!(matches!(err, EnvError::Object(ObjectError::NoStaticConfig(_))), "{err}");
    let local = Arc::new(FakeObjects::default());
    local.put_config_map("ns", json!({"metadata": {"name": "settings"}, "data": {"NODE": "1"}}));
    let sources = ObjectSources { local: Some(local), ..objects() };
    let env = env_of(&p, &sources, &Recorder::default()).await.unwrap();
    assert_eq!(env, [("NODE".to_string(), "1".to_string())], "the node-local one, not the API's");
}

#[tokio::test]
async fn fields_and_resources_resolve_and_expand_in_order() {
    let p = pod(json!({"name": "app", "image": "x:1",
        "resources": {"requests": {"memory": "64Mi"}},
        "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}},
            {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "GREETING", "value": "hi $(POD) at $(IP), $(LATER)"},
            {"name": "LATER", "value": "x"},
        ],
    }));
    let env = env_of(&p, &ObjectSources::default(), &Recorder::default()).await.unwrap();
    let map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(map["GREETING"], "hi web at 10.1.0.5, $(LATER)");
    assert_eq!((map["HOST"], map["APP"], map["MEM"], map["CPUS"]), ("192.0.2.1", "web", "64", "2"));
    let order: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(order, ["POD", "IP", "HOST", "APP", "MEM", "CPUS", "GREETING", "LATER"]);
    let bad = pod(
        json!({"name": "app", "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}]}),
    );
    let err = env_of(&bad, &ObjectSources::default(), &Recorder::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "env \"X\": unsupported fieldPath: spec.bogus");
}
