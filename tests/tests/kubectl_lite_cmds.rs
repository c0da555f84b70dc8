//! kubectl-lite beside the real kubectl v1.35 for `taint`, `api-versions`, `cluster-info`,
//! `get --sort-by` and `completion`'s refusals (its scripts differ by design: clap's, not
//! cobra's; bash must load kubectl-lite's): one script per command run through each against its own apiserver-lite,
//! stdout, stderr and exit codes compared after masking server addresses and the log lines
//! (klog's) kubectl writes for an unreachable server.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use e2e::apiserver::ApiServer;

/// Cluster services as `cluster-info` lists them (in `kube-system`), and one it must not.
const SERVICES: &str = "apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {kubernetes.io/cluster-service: \"true\", kubernetes.io/name: CoreDNS}}
spec:
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: metrics, namespace: kube-system, labels: {kubernetes.io/cluster-service: \"true\"}}
spec:
  ports: [{name: https, port: 443}]
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: kube-system, labels: {kubernetes.io/cluster-service: \"true\"}}
spec:
  ports: [{port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: other, namespace: kube-system}
spec:
  ports: [{port: 80}]
";

/// ConfigMaps whose fields sort differently by name, number, quantity and creation order.
/// A pod whose strings are long enough for `-o yaml` to fold, in every flow style.
const LONG: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: long
  annotations:
    plain: "This is a long plain sentence with many words that will certainly need to be folded by the emitter because it goes well past eighty columns, twice over in fact, to see the second break too."
    spaces: "aaaaaaaaa bbbbbbbbb ccccccccc ddddddddd eeeeeeeee fffffffff ggggggggg hhhhhh  iiiiiiiii  jjjjjjjjj   kkkkkkkkk"
    url: "short https://example.com/a/very/long/url/that/crosses/the/eighty/column/limit/for/sure/and/more then words"
    single: "it's: a long value with a colon and space so plain is not allowed, and it's long enough to fold twice over the limit of eighty columns for sure"
    double: "a\ttab then a long text with many words so that the double quoted style has to fold it somewhere past the eighty column limit  with  spaces"
    edge: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx y z"
    unicode: "ééééééééé ééééééééé ééééééééé ééééééééé ééééééééé ééééééééé ééééééééé ééééééééé ééééééééé"
spec:
  containers:
  - name: c
    image: busybox
    args:
    - "sh"
    - "-c"
    - "echo this is a rather long shell command line that goes on and on past the eighty column limit && sleep 3600"
    env:
    - name: LONG
      value: "value: with a colon so it is single quoted and long enough to need folding at the eighty column limit"
"#;

const CONFIGMAPS: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: b, labels: {rank: \"2\"}, annotations: {size: 1Gi}}
data: {k: x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, labels: {rank: \"10\"}, annotations: {size: 512Mi}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, labels: {rank: \"1\"}, annotations: {size: \"2\"}}
data: {k: z}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: d}
data: {k: w}
";

const NODES: &str = "apiVersion: v1
kind: Node
metadata: {name: n1, labels: {pool: \"a\"}}
spec:
  taints:
  - {key: old, value: \"1\", effect: NoExecute, timeAdded: \"2024-01-01T00:00:00Z\"}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
";

/// Taints added, replaced and removed; every refusal kubectl words on its side; nodes by
/// name, selector and `--all`; dry runs; errors of some nodes reported after the others.
const TAINT: &[&[&str]] = &[
    &["create", "-f", "nodes.yaml"],
    // Refused before the server is asked.
    &["taint", "nodes", "n1", "a=b:NoSchedule", "a=c:NoSchedule"],
    &["taint", "nodes", "n1", "a=b:Bad"],
    &["taint", "nodes", "n1", "a=b=c:NoSchedule"],
    &["taint", "nodes", "n1", "a:b:c"],
    &["taint", "nodes", "n1", "a=-b:NoSchedule"],
    &["taint", "nodes", "n1", "a--"],
    &["taint", "nodes", "n1", "a"],
    &["taint", "nodes", "n1", "a=b:NoSchedule", "x"],
    &["taint", "a=b:NoSchedule"],
    &["taint", "nodes", "n1", "a=b:NoSchedule", "--dry-run=maybe"],
    // Refused once the type is known.
    &["taint", "nodes", "n1", "a=b:NoSchedule", "a-"],
    &["taint", "nodes", "n1", "a=b:NoSchedule", "a:NoSchedule-"],
    &["taint", "pods", "n1", "a=b:NoSchedule"],
    &["taint", "foo", "n1", "a=b:NoSchedule"],
    &["taint", "node/n1", "a=b:NoSchedule"],
    &["taint", "nodes", "a=b:NoSchedule"],
    &["taint", "nodes", "--all", "-l", "pool=a", "a=b:NoSchedule"],
    &["taint", "nodes", "missing", "a=b:NoSchedule"],
    // Added, refused again, replaced.
    &["taint", "nodes", "n1", "a=b:NoSchedule"],
    &["taint", "nodes", "n1", "a=c:NoSchedule", "b=1:NoSchedule"],
    &["taint", "nodes", "n1", "a=c:NoSchedule", "--overwrite"],
    &["taint", "nodes", "n1", "a=c:NoExecute", "b:PreferNoSchedule"],
    &["taint", "nodes", "n1", "example.com/k=v:NoSchedule"],
    // Removals, found or not.
    &["taint", "nodes", "n1", "a:NoSchedule-", "zz-"],
    &["taint", "nodes", "n1", "zz-", "yy:NoSchedule-"],
    &["taint", "nodes", "n1", "a-", "c=1:NoSchedule"],
    &["taint", "nodes", "n1", "old:NoExecute-"],
    // Dry runs change nothing.
    &["taint", "nodes", "n1", "q=1:NoSchedule", "--dry-run=client"],
    &["taint", "nodes", "n1", "q=1:NoSchedule", "--dry-run=server"],
    // By selector, all nodes, several names with errors among them.
    &["taint", "nodes", "-l", "pool=a", "q=1:NoSchedule"],
    &["taint", "nodes", "-l", "pool=none", "q=1:NoSchedule"],
    &["taint", "nodes", "n1", "n2", "q=1:NoSchedule"],
    &["taint", "nodes", "n1", "missing", "t=1:NoSchedule"],
    &["taint", "nodes", "n1", "n2", "r-"],
    &["taint", "nodes", "--all", "t3=1:PreferNoSchedule"],
    &["taint", "nodes", "--all", "t3-"],
    &["taint", "node", "n1", "t-", "--overwrite"],
    &["taint", "nodes", "n1", "-o", "name", "v=1:NoSchedule"],
    &[
        "get",
        "nodes",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.taints}{\"\\n\"}{end}",
    ],
];

#[test]
fn kubectl_lite_taints_nodes_as_kubectl_does() {
    compare(TAINT);
}

/// What the server serves and where the cluster's services run.
const CLUSTER: &[&[&str]] = &[
    &["api-versions"],
    &["api-versions", "extra"],
    &["cluster-info"],
    &["create", "-f", "services.yaml"],
    &["cluster-info"],
    &["cluster-info", "ignored"],
    &["cluster-info", "-n", "default"],
    &["--server", "https://127.0.0.1:1", "cluster-info"],
    &["--server", "https://127.0.0.1:1", "api-versions"],
    &["completion"],
    &["completion", "bash", "zsh"],
    &["completion", "tcsh"],
];

#[test]
fn kubectl_lite_prints_api_versions_and_cluster_info_as_kubectl_does() {
    compare(CLUSTER);
}

#[test]
fn kubectl_lite_completion_script_loads_in_bash_and_completes_commands() {
    let server = ApiServer::start().unwrap();
    let out = server.kubectl_lite(&["completion", "bash"]).unwrap();
    assert_eq!(out.status.code(), Some(0));
    let script = server.dir().join("completion.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // Completing `kubectl-lite ta` offers `taint`.
    let probe = format!(
        "source {}; COMP_WORDS=(kubectl-lite ta); COMP_CWORD=1; _kubectl__lite kubectl-lite ta kubectl-lite; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let bash = std::process::Command::new("bash").args(["-c", &probe]).output().unwrap();
    let offered = String::from_utf8_lossy(&bash.stdout);
    assert!(bash.status.success(), "{}", String::from_utf8_lossy(&bash.stderr));
    assert!(offered.lines().any(|l| l == "taint"), "{offered}");
}

/// Tables and listed objects sorted by name, a label (a string), an annotation read as a
/// quantity, a field some objects lack, and a field none has.
const SORT: &[&[&str]] = &[
    &["create", "-f", "configmaps.yaml"],
    &["get", "cm", "--sort-by=.metadata.name"],
    &["get", "cm", "--sort-by={.metadata.labels.rank}"],
    &["get", "cm", "--sort-by=metadata.annotations.size", "-o", "name"],
    &["get", "cm", "--sort-by=.data.k", "-o", "custom-columns=NAME:.metadata.name,K:.data.k"],
    &["get", "cm", "--sort-by=.metadata.name", "-o", "jsonpath={.items[*].metadata.name}"],
    &["get", "cm", "--sort-by=.spec.nothing"],
    &["get", "cm", "a", "--sort-by=.spec.nothing"],
    &["get", "cm", "-l", "rank", "--sort-by=.metadata.labels.rank", "--no-headers"],
];

#[test]
fn kubectl_lite_sorts_what_get_prints_as_kubectl_does() {
    compare(SORT);
}

/// `run --expose`: the Service before the pod, in every output; the refusal without a port; a
/// second run of the same name stopped by the pod, before any Service.
const RUN_EXPOSE: &[&[&str]] = &[
    &["run", "web", "--image=nginx", "--port=80", "--expose", "--dry-run=client", "-o", "yaml"],
    &[
        "run",
        "web",
        "--image=nginx",
        "--port=8080",
        "--expose",
        "-l",
        "app=w,tier=f",
        "--dry-run=client",
        "-o",
        "json",
    ],
    &["run", "web", "--image=nginx", "--port=80", "--expose", "--dry-run=client", "-o", "name"],
    &["run", "web", "--image=nginx", "--port=80", "--expose", "--dry-run=client"],
    &["run", "web", "--image=nginx", "--expose"],
    &["run", "web", "--image=nginx", "--port=80", "--expose"],
    &[
        "get",
        "svc",
        "web",
        "-o",
        "jsonpath={.metadata.labels} {.spec.ports} {.spec.selector} {.spec.type}",
    ],
    &["get", "pod", "web", "-o", "jsonpath={.metadata.labels} {.spec.containers[0].ports}"],
    &["run", "web", "--image=nginx", "--port=80", "--expose"],
    &[
        "run",
        "web2",
        "--image=nginx",
        "--port=81",
        "--expose",
        "-l",
        "app=w2",
        "--dry-run=server",
        "-o",
        "name",
    ],
    &["get", "svc", "-o", "name"],
];

#[test]
fn kubectl_lite_runs_and_exposes_a_pod_as_kubectl_does() {
    compare(RUN_EXPOSE);
}

/// `create -f` with dry runs and output formats; then for real, and again (refused).
const CREATE_FILES: &[&[&str]] = &[
    &["create", "-f", "configmaps.yaml", "--dry-run=client"],
    &["create", "-f", "configmaps.yaml", "--dry-run=client", "-o", "yaml"],
    &["create", "-f", "long.yaml", "--dry-run=client", "-o", "yaml"],
    &["create", "-f", "configmaps.yaml", "--dry-run=client", "-o", "json"],
    &["create", "-f", "configmaps.yaml", "--dry-run=client", "-o", "jsonpath={.metadata.name} "],
    &["create", "-f", "configmaps.yaml", "--dry-run=server", "-o", "name"],
    &["create", "-f", "configmaps.yaml", "--dry-run=server"],
    &["create", "-f", "configmaps.yaml", "-o", "wide"],
    &["create", "-f", "configmaps.yaml", "--validate=maybe"],
    &["get", "cm", "-o", "name"],
    &["create", "-f", "configmaps.yaml", "--field-manager=mine", "-o", "name"],
    &["get", "cm", "a", "-o", "jsonpath={.metadata.managedFields[0].manager}"],
    &["create", "-f", "configmaps.yaml"],
];

#[test]
fn kubectl_lite_creates_from_files_with_dry_runs_and_outputs_as_kubectl_does() {
    compare(CREATE_FILES);
}

/// `apply -o` other than `name`: the applied objects printed once all are applied, several as
/// a `List`; an unknown format refused only after applying.
const APPLY_OUTPUT: &[&[&str]] = &[
    &["apply", "-f", "configmaps.yaml", "--dry-run=client", "-o", "yaml"],
    &["apply", "-f", "configmaps.yaml", "--dry-run=client", "-o", "json"],
    &["apply", "-f", "configmaps.yaml", "--dry-run=client", "-o", "kyaml"],
    &["apply", "-f", "configmaps.yaml", "-l", "rank=1", "--dry-run=client", "-o", "json"],
    &["apply", "-f", "configmaps.yaml", "-o", "jsonpath={.items[*].metadata.name}"],
    &["apply", "-f", "configmaps.yaml", "-l", "rank=1", "-o", "jsonpath={.data}"],
    &["apply", "-f", "configmaps.yaml", "-o", "wide"],
    &["get", "cm", "-o", "name"],
];

#[test]
fn kubectl_lite_prints_what_apply_applied_as_kubectl_does() {
    compare(APPLY_OUTPUT);
}

/// `-o kyaml`: a file's objects, generators' objects in their field order, an empty list.
const KYAML: &[&[&str]] = &[
    &["create", "-f", "configmaps.yaml", "--dry-run=client", "-o", "kyaml"],
    &[
        "run",
        "web",
        "--image=nginx",
        "--port=80",
        "--expose",
        "-l",
        "app=a b",
        "--dry-run=client",
        "-o",
        "kyaml",
    ],
    &[
        "create",
        "deployment",
        "d",
        "--image=nginx",
        "--replicas=2",
        "--dry-run=client",
        "-o",
        "kyaml",
    ],
    &["get", "cm", "-l", "nothing=here", "-o", "kyaml"],
];

#[test]
fn kubectl_lite_prints_kyaml_as_kubectl_does() {
    compare(KYAML);
}

/// Fails listing every step of `script` whose masked output or exit code differs between
/// kubectl-lite and the real kubectl, each against a server of its own.
fn compare(script: &[&[&str]]) {
    let setup = |s: &ApiServer| {
        std::fs::write(s.dir().join("nodes.yaml"), NODES).unwrap();
        std::fs::write(s.dir().join("services.yaml"), SERVICES).unwrap();
        std::fs::write(s.dir().join("configmaps.yaml"), CONFIGMAPS).unwrap();
        std::fs::write(s.dir().join("long.yaml"), LONG).unwrap();
    };
    let differences = e2e::apiserver::script_differences(script, setup, mask).unwrap();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Masks what differs between two servers by nature, and klog's lines (kubectl logs each
/// failed discovery read before its error; kubectl-lite has no such log).
fn mask(bytes: &[u8]) -> String {
    let port = regex::Regex::new(r"127\.0\.0\.1:\d+").unwrap();
    let klog = regex::Regex::new(r"(?m)^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ .*\n").unwrap();
    let age = regex::Regex::new(r"\b\d+(s|m|h|d|y)(\d+(s|m|h|d))?\b").unwrap();
    let ws = regex::Regex::new(r" +").unwrap();
    let t = String::from_utf8_lossy(bytes).replace("kubectl-lite ", "kubectl ");
    let t = klog.replace_all(&t, "");
    let t = port.replace_all(&t, "<server>");
    let t = age.replace_all(&t, "<age>");
    ws.replace_all(&t, " ").into_owned()
}
