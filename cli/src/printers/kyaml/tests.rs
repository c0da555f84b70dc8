// Expected texts are what kubectl v1.35 printed for the same objects (`create --dry-run=client
// -o kyaml`).

use serde_json::json;

use super::*;

#[test]
fn maps_lists_and_scalars_print_as_kubectl_prints_them() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "spec": {"containers": [{"args": [], "command": ["sh", "-c", "echo hi"],
            "env": [{"name": "A", "value": "1"}], "image": "busybox", "name": "c",
            "ports": [{"containerPort": 80, "hostPort": 8080}],
            "resources": {"limits": {"cpu": "1"}}}],
          "hostNetwork": false, "nodeSelector": {},
          "securityContext": {"runAsUser": 0, "supplementalGroups": [1, 2]},
          "terminationGracePeriodSeconds": 0, "tolerations": []}});
    assert_eq!(
        document(&pod),
        r#"---
{
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "p1",
  },
  spec: {
    containers: [{
      args: [],
      command: [
        "sh",
        "-c",
        "echo hi",
      ],
      env: [{
        name: "A",
        value: "1",
      }],
      image: "busybox",
      name: "c",
      ports: [{
        containerPort: 80,
        hostPort: 8080,
      }],
      resources: {
        limits: {
          cpu: "1",
        },
      },
    }],
    hostNetwork: false,
    nodeSelector: {},
    securityContext: {
      runAsUser: 0,
      supplementalGroups: [
        1,
        2,
      ],
    },
    terminationGracePeriodSeconds: 0,
    tolerations: [],
  },
}
"#
    );
}

#[test]
fn strings_are_escaped_and_folded_and_keys_quoted_only_where_yaml_would_misread_them() {
    let data = json!({"tab": "a\tb", "nbsp": "a\u{a0}b", "zw": "a\u{200b}b", "ls": "a\u{2028}b",
        "ml": "first\n  indented\n\tTabbed\nlast", "mlnotrail": "x\ny", "onlynl": "\n",
        "q\"k": "v", "a b": "v", "-x": "v", "x-": "v", ".x": "v", "1.5": "v", "true": "v",
        "null": "v", "~": "v", "2024-01-02": "v", "11:30": "v", "0x1F": "v", "1_000": "v",
        "é": "v", "": "empty key", "k-e_y.x": "v", "app.kubernetes.io/name": "x", "2x": "y",
        "no": "on", "quoted": "with \"quotes\" and \\ backslash"});
    assert_eq!(
        document(&json!({"data": data})),
        "---
{
  data: {
    \"\": \"empty key\",
    \"-x\": \"v\",
    \".x\": \"v\",
    \"0x1F\": \"v\",
    \"1.5\": \"v\",
    \"11:30\": \"v\",
    \"1_000\": \"v\",
    \"2024-01-02\": \"v\",
    2x: \"y\",
    \"a b\": \"v\",
    app.kubernetes.io/name: \"x\",
    k-e_y.x: \"v\",
    ls: \"a\\Lb\",
    ml: \"\\
       first\\n\\
      \\  indented\\n\\
      \\\tTabbed\\n\\
       last\\
      \",
    mlnotrail: \"\\
       x\\n\\
       y\\
      \",
    nbsp: \"a\\_b\",
    \"no\": \"on\",
    \"null\": \"v\",
    onlynl: \"\\
       \\n\\
      \",
    \"q\\\"k\": \"v\",
    quoted: \"with \\\"quotes\\\" and \\\\ backslash\",
    tab: \"a\tb\",
    \"true\": \"v\",
    \"x-\": \"v\",
    zw: \"a\\u200bb\",
    \"~\": \"v\",
    é: \"v\",
  },
}
"
    );
}

#[test]
fn a_generators_object_keeps_its_field_order() {
    let o = crate::cmd::create::tree::Obj::new()
        .with("kind", "Service")
        .with("apiVersion", "v1")
        .with("status", crate::cmd::create::tree::Obj::new());
    assert_eq!(
        document(&Node::Obj(o)),
        "---\n{\n  kind: \"Service\",\n  apiVersion: \"v1\",\n  status: {},\n}\n"
    );
}

#[test]
fn yaml_look_alikes_are_recognised() {
    for s in [
        "0",
        "010",
        "0o17",
        "0b101",
        "-12",
        "1e3",
        "1.5e-3",
        ".5",
        "+.inf",
        "Inf",
        "NaN",
        "190:20:30",
        "1:30",
        "2001-12-14",
        "2001-12-14t21:59:43.10-05:00",
        "2001-12-14 21:59:43.10",
        "Yes",
        "OFF",
        "t",
        "F",
    ] {
        assert!(needs_quotes(s), "{s:?}");
    }
    for s in ["a", "2x", "1.2.3", "v1", "x_y", "a/b", "2001-13-01", "é", "0x", "e3"] {
        assert!(!needs_quotes(s), "{s:?}");
    }
    assert!(!sexagesimal("1:60") && sexagesimal("1:59"));
}
