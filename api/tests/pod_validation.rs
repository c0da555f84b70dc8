//! Pod validation rejects what the real API server rejects, with the same field paths, error
//! types and messages (kube-apiserver 1.35 wording). Each pod is defaulted first, as the server
//! does before validating.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use api::validation::{ErrorKind, validate_pod};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn pod(spec: serde_json::Value) -> Pod {
    let mut p: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }))
    .unwrap();
    api::defaults::default_pod(&mut p);
    p
}

fn web(extra: serde_json::Value) -> serde_json::Value {
    let mut c = json!({"name": "web", "image": "busybox:1.35"});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(extra.clone());
    }
    c
}

/// The rendered errors (`field: message`) of a pod.
fn errors(p: &Pod) -> Vec<String> {
    validate_pod(p).err().map(|e| e.0.iter().map(ToString::to_string).collect()).unwrap_or_default()
}

fn assert_rejects(spec: serde_json::Value, want: &[&str]) {
    let got = errors(&pod(spec.clone()));
    assert_eq!(got, want, "for spec {spec}");
}

#[test]
fn a_valid_pod_passes() {
    assert_rejects(
        json!({"containers": [web(json!({"ports": [{"containerPort": 80, "name": "http"}]}))]}),
        &[],
    );
}

#[test]
fn containers_are_required() {
    assert_rejects(json!({"containers": []}), &["spec.containers: Required value"]);
}

#[test]
fn container_names_images_and_duplicates() {
    assert_rejects(
        json!({"containers": [{"name": "web"}]}),
        &["spec.containers[0].image: Required value"],
    );
    assert_rejects(
        json!({"containers": [{"name": "Web", "image": "x:1"}]}),
        &[
            "spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({})), web(json!({}))]}),
        &["spec.containers[1].name: Duplicate value: \"web\""],
    );
    assert_rejects(
        json!({"containers": [web(json!({}))], "initContainers": [web(json!({}))]}),
        &["spec.initContainers[0].name: Duplicate value: \"web\""],
    );
    assert_rejects(
        json!({"containers": [web(json!({"image": " busybox"}))]}),
        &[
            "spec.containers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
        ],
    );
}

#[test]
fn ports() {
    assert_rejects(
        json!({"containers": [web(json!({"ports": [{"containerPort": 70000}]}))]}),
        &[
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({"ports": [{"containerPort": 0}]}))]}),
        &["spec.containers[0].ports[0].containerPort: Required value"],
    );
    assert_rejects(
        json!({"containers": [web(json!({"ports": [{"containerPort": 80, "protocol": "FOO"}]}))]}),
        &[
            "spec.containers[0].ports[0].protocol: Unsupported value: \"FOO\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({"ports": [{"containerPort": 80, "name": "8080"}]}))]}),
        &[
            "spec.containers[0].ports[0].name: Invalid value: \"8080\": must contain at least one letter (a-z)",
        ],
    );
    assert_rejects(
        json!({"hostNetwork": true, "containers": [web(json!({"ports": [{"containerPort": 80, "hostPort": 8080}]}))]}),
        &[
            "spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true",
        ],
    );
}

#[test]
fn policies() {
    assert_rejects(
        json!({"restartPolicy": "Sometimes", "containers": [web(json!({}))]}),
        &[
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        ],
    );
    assert_rejects(
        json!({"dnsPolicy": "Custom", "containers": [web(json!({}))]}),
        &[
            "spec.dnsPolicy: Unsupported value: \"Custom\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"",
        ],
    );
    assert_rejects(
        json!({"activeDeadlineSeconds": 0, "containers": [web(json!({}))]}),
        &[
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({"imagePullPolicy": "Sometimes"}))]}),
        &[
            "spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
        ],
    );
}

#[test]
fn resources() {
    assert_rejects(
        json!({"containers": [web(json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}))]}),
        &[
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({"resources": {"limits": {"memory": "-1"}}}))]}),
        &[
            "spec.containers[0].resources.limits[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
            "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({"resources": {"requests": {"foo": "1"}}}))]}),
        &[
            "spec.containers[0].resources.requests[foo]: Invalid value: \"foo\": must be a standard resource type or fully qualified",
            "spec.containers[0].resources.requests[foo]: Invalid value: \"foo\": must be a standard resource for containers",
        ],
    );
}

#[test]
fn volumes_and_mounts() {
    assert_rejects(
        json!({"containers": [web(json!({"volumeMounts": [{"name": "data", "mountPath": "/data"}]}))]}),
        &["spec.containers[0].volumeMounts[0].name: Not found: \"data\""],
    );
    assert_rejects(
        json!({"volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}], "containers": [web(json!({}))]}),
        &["spec.volumes[1].name: Duplicate value: \"a\""],
    );
    assert_rejects(
        json!({"volumes": [{"name": "a", "emptyDir": {}, "hostPath": {"path": "/x"}}], "containers": [web(json!({}))]}),
        &["spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"],
    );
    assert_rejects(
        json!({"volumes": [{"name": "a", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "m", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}], "containers": [web(json!({}))]}),
        &[
            "spec.volumes[0].emptyDir.sizeLimit: Forbidden: not enforced for a disk-backed emptyDir yet (no local storage eviction); only `medium: Memory` takes it, as the tmpfs size",
        ],
    );
    assert_rejects(
        json!({"volumes": [{"name": "a", "hostPath": {"path": "/x/../etc"}}], "containers": [web(json!({}))]}),
        &["spec.volumes[0].hostPath.path: Invalid value: \"/x/../etc\": must not contain '..'"],
    );
    assert_rejects(
        json!({"volumes": [{"name": "a", "emptyDir": {}}], "containers": [web(json!({"volumeMounts": [{"name": "a", "mountPath": "/d"}, {"name": "a", "mountPath": "/d"}]}))]}),
        &["spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/d\": must be unique"],
    );
    assert_rejects(
        json!({"volumes": [{"name": "a", "emptyDir": {}}], "containers": [web(json!({"volumeMounts": [
            {"name": "a", "mountPath": "/d", "subPath": "x", "subPathExpr": "$(POD)"},
            {"name": "a", "mountPath": "/e", "subPathExpr": "../$(POD)"},
            {"name": "a", "mountPath": "/f", "recursiveReadOnly": "Enabled"},
            {"name": "a", "mountPath": "/g", "readOnly": true, "recursiveReadOnly": "Always"},
        ]}))]}),
        &[
            "spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: \"$(POD)\": subPathExpr and subPath are mutually exclusive",
            "spec.containers[0].volumeMounts.subPathExpr: Invalid value: \"../$(POD)\": must not contain '..'",
            "spec.containers[0].volumeMounts[2].recursiveReadOnly: Forbidden: may only be specified when readOnly is true (got Enabled)",
            "spec.containers[0].volumeMounts[3].recursiveReadOnly: Unsupported value: \"Always\": supported values: \"Disabled\", \"IfPossible\", \"Enabled\"",
        ],
    );
}

#[test]
fn env() {
    assert_rejects(
        json!({"containers": [web(json!({"env": [{"name": "A=B", "value": "x"}]}))]}),
        &[
            "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}]}))]}),
        &[
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.bogus\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"",
        ],
    );
}

#[test]
fn metadata() {
    let mut p = pod(json!({"containers": [web(json!({}))]}));
    p.metadata.name = None;
    assert_eq!(errors(&p), ["metadata.name: Required value: name or generateName is required"]);
    p.metadata.name = Some("Nginx_Pod".into());
    let e = errors(&p);
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with(
            "metadata.name: Invalid value: \"Nginx_Pod\": a lowercase RFC 1123 subdomain"
        ),
        "{e:?}"
    );
    p.metadata.name = Some("web".into());
    p.metadata.namespace = None;
    assert_eq!(errors(&p), ["metadata.namespace: Required value"]);
    p.metadata.namespace = Some("default".into());
    p.metadata.labels = Some([("app".to_string(), "bad value".to_string())].into_iter().collect());
    assert!(errors(&p)[0].starts_with(
        "metadata.labels: Invalid value: \"bad value\": a valid label must be an empty string"
    ));
    p.metadata.labels = None;
    p.metadata.annotations = Some([("big".to_string(), "x".repeat(300_000))].into_iter().collect());
    assert_eq!(errors(&p), ["metadata.annotations: Too long: must have at most 262144 bytes"]);
}

#[test]
fn several_errors_aggregate_like_the_status_message() {
    let p = pod(json!({"restartPolicy": "Sometimes", "containers": [{"name": "web"}]}));
    let errs = validate_pod(&p).unwrap_err();
    assert_eq!(
        errs.status_message("Pod", "web"),
        "Pod \"web\" is invalid: [spec.containers[0].image: Required value, spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"]"
    );
    assert_eq!(errs.0[0].kind, ErrorKind::Required);
    assert_eq!(errs.0[0].kind.cause_reason(), "FieldValueRequired");
    assert_eq!(errs.0[0].message(), "Required value");
}

#[test]
fn lifecycle_hooks_need_one_handler_the_kubelet_runs() {
    assert_rejects(
        json!({"containers": [web(json!({"lifecycle": {
            "postStart": {"exec": {"command": ["true"]}},
            "preStop": {"sleep": {"seconds": 5}},
        }}))]}),
        &[],
    );
    assert_rejects(
        json!({"containers": [web(json!({"lifecycle": {"postStart": {}}}))]}),
        &["spec.containers[0].lifecycle.postStart: Required value: must specify a handler type"],
    );
    assert_rejects(
        json!({"containers": [web(json!({"lifecycle": {"preStop": {"tcpSocket": {"port": 80}}}}))]}),
        &[
            "spec.containers[0].lifecycle.preStop.tcpSocket: Forbidden: tcpSocket is not supported as a lifecycle handler: use exec, httpGet or sleep",
        ],
    );
    assert_rejects(
        json!({"terminationGracePeriodSeconds": 10,
               "containers": [web(json!({"lifecycle": {"preStop": {"sleep": {"seconds": 11}}}}))]}),
        &[
            "spec.containers[0].lifecycle.preStop.sleep.seconds: Invalid value: 11: must be non-negative and less than terminationGracePeriodSeconds (10)",
        ],
    );
    assert_rejects(
        json!({"containers": [web(json!({"lifecycle": {"postStart": {
            "exec": {"command": ["true"]}, "httpGet": {"port": 80}}}}))]}),
        &[
            "spec.containers[0].lifecycle.postStart.httpGet: Forbidden: may not specify more than 1 handler type",
        ],
    );
}

#[test]
fn sidecar_probes_are_validated_like_app_container_probes() {
    assert_rejects(
        json!({"initContainers": [{"name": "side", "image": "x:1", "restartPolicy": "Always",
                 "livenessProbe": {"exec": {"command": []}}}],
               "containers": [web(json!({}))]}),
        &["spec.initContainers[0].livenessProbe.exec.command: Required value"],
    );
}
