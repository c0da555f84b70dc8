//! kubectl-lite beside the real kubectl v1.35 for `apply --prune`: one script run through each
//! against its own apiserver-lite (directories of labelled ConfigMaps and a Deployment applied,
//! then applied again with files gone, by selector, `--all`, an allowlist, dry runs, `-o name`,
//! and the flag combinations kubectl refuses), stdout, stderr and exit codes compared after
//! masking server addresses and klog's lines.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use e2e::apiserver::ApiServer;

fn configmap(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels: {{app: x}}\ndata: {{k: {name}}}\n"
    )
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: x}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.8}]
";

/// Labelled as the applied ones, but made by `create`: no last-applied annotation.
const CREATED: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: created, labels: {app: x}}
";

/// Applied (annotated) but not labelled.
const UNLABELLED: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: unlabelled}
";

/// In another namespace: pruned only where an applied object was.
const ELSEWHERE: &str = "apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: team, labels: {app: x}}
";

/// The directories the script applies: `v1` all three ConfigMaps and the Deployment, `v2`
/// without `c`, `v3` only `a`.
fn write_files(dir: &std::path::Path) {
    let files: &[(&str, &[&str])] =
        &[("v1", &["a", "b", "c"]), ("v2", &["a", "b"]), ("v3", &["a"])];
    for (sub, names) in files {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).unwrap();
        for n in *names {
            std::fs::write(d.join(format!("cm-{n}.yaml")), configmap(n)).unwrap();
        }
        if *sub != "v3" {
            std::fs::write(d.join("deploy.yaml"), DEPLOYMENT).unwrap();
        }
    }
    std::fs::write(dir.join("created.yaml"), CREATED).unwrap();
    std::fs::write(dir.join("unlabelled.yaml"), UNLABELLED).unwrap();
    std::fs::write(dir.join("elsewhere.yaml"), ELSEWHERE).unwrap();
    std::fs::write(dir.join("empty.yaml"), "---\n").unwrap();
}

const LIST: &[&str] = &["get", "cm,deploy", "-A", "-o", "name"];

/// Applied, then pruned as files go away. The default prune set fails alike in both:
/// apiserver-lite serves no PersistentVolumeClaims (nor PersistentVolumes,
/// ReplicationControllers, Ingresses, StatefulSets), so kubectl cannot map the first of them;
/// the pruning itself runs under allowlists.
const PRUNE: &[&[&str]] = &[
    &["apply", "-f", "v1"],
    &["create", "-f", "created.yaml"],
    &["apply", "-f", "unlabelled.yaml"],
    &["apply", "-f", "elsewhere.yaml"],
    &["apply", "-f", "v2", "--prune", "-l", "app=x"],
    // Dry runs name what would go and delete nothing.
    &[
        "apply",
        "-f",
        "v2",
        "--prune",
        "-l",
        "app=x",
        "--prune-allowlist=core/v1/ConfigMap",
        "--dry-run=client",
    ],
    &[
        "apply",
        "-f",
        "v2",
        "--prune",
        "-l",
        "app=x",
        "--prune-allowlist=core/v1/ConfigMap",
        "--dry-run=server",
    ],
    LIST,
    // The removed file's ConfigMap goes; the created, unlabelled and other namespace's stay.
    &[
        "apply",
        "-f",
        "v2",
        "--prune",
        "-l",
        "app=x",
        "--prune-allowlist=core/v1/ConfigMap",
        "--prune-allowlist=apps/v1/Deployment",
    ],
    LIST,
    &["apply", "-f", "v2", "--prune", "-l", "app=x", "--prune-allowlist=core/v1/ConfigMap"],
    // Only ConfigMaps are pruned under this allowlist: the Deployment, in no file, stays.
    &[
        "apply",
        "-f",
        "v3",
        "--prune",
        "-l",
        "app=x",
        "--prune-allowlist=core/v1/ConfigMap",
        "-o",
        "name",
    ],
    LIST,
    &[
        "apply",
        "-f",
        "v3",
        "--prune",
        "-l",
        "app=x",
        "--prune-allowlist",
        "apps/v1/Deployment",
        "--prune-allowlist",
        "core/v1/configmap",
        "--cascade=orphan",
    ],
    LIST,
    // --all: every applied ConfigMap of the namespace not in the files, labelled or not.
    &["apply", "-f", "v1", "--prune", "--all", "--prune-allowlist=core/v1/ConfigMap"],
    LIST,
    // -n: its namespace is pruned (the file's object lands there).
    &[
        "apply",
        "-f",
        "v3",
        "-n",
        "team",
        "--prune",
        "-l",
        "app=x",
        "--prune-allowlist=core/v1/ConfigMap",
    ],
    LIST,
    // The selector picks the files' objects too.
    &["apply", "-f", "v1", "-l", "app=none"],
    &["apply", "-f", "v1", "-l", "app=none", "--prune", "--prune-allowlist=core/v1/ConfigMap"],
];

#[test]
fn kubectl_lite_prunes_what_is_no_longer_applied_as_kubectl_does() {
    compare(PRUNE);
}

/// Flag combinations kubectl refuses, and allowlists it cannot map: nothing applied.
const REFUSED: &[&[&str]] = &[
    &["apply", "-f", "v1", "--prune"],
    &["apply", "-f", "v1", "--prune", "--all", "-l", "app=x"],
    &["apply", "-f", "v1", "--all", "-l", "app=x"],
    &["apply", "-f", "v1", "--prune", "-l", "app=x", "--server-side"],
    &["apply", "-f", "v1", "--prune", "-l", "app=x", "--prune-allowlist=ConfigMap"],
    &["apply", "-f", "v1", "--prune", "-l", "app=x", "--prune-allowlist=core/v1/Nope"],
    &["apply", "-f", "v1", "--prune", "-l", "app=x", "--prune-allowlist=apps/v2/Deployment"],
    &["apply", "-f", "v1", "--prune", "-l", "app=x", "--prune-allowlist=core/v1/configmap"],
    &["apply", "-f", "v1", "--prune", "--prune-allowlist=core/v1/ConfigMap"],
    &["apply", "-f", "v1", "--prune", "-l", "app=x", "--cascade=sideways"],
    &["apply", "-f", "v1", "--server-side", "--dry-run=client"],
    &["apply", "-f", "v1", "--dry-run=maybe"],
    &["apply", "-f", "empty.yaml", "--prune", "--all"],
    &["create", "-f", "empty.yaml"],
    // Selectors kubectl's label parser refuses, in its words.
    &["apply", "-f", "v1", "-l", "a b"],
    &["apply", "-f", "v1", "-l", "a in (x"],
    &["apply", "-f", "v1", "-l", "a=(x)"],
    &["apply", "-f", "v1", "-l", "!"],
    &["apply", "-f", "v1", "-l", "a=b c"],
    &["apply", "-f", "v1", "-l", "a,"],
    &["apply", "-f", "v1", "-l", "a>x"],
    &["apply", "-f", "v1", "-l", "a=-x"],
    &["apply", "-f", "v1", "-l", "a>-1x"],
    &["apply", "-f", "v1", "-l", "a/b/c"],
    &["apply", "-f", "v1", "-l", "Bad_/k"],
    LIST,
    // Accepted, with kubectl's warning for a boolean --cascade.
    &[
        "apply",
        "-f",
        "v1",
        "--cascade=true",
        "--prune",
        "-l",
        "app=x",
        "--prune-allowlist=core/v1/Secret",
    ],
    &[
        "apply",
        "-f",
        "v1",
        "--prune",
        "-l",
        "app in (x, y),!gone",
        "--prune-allowlist=core/v1/Secret",
        "--grace-period=0",
        "--dry-run=server",
        "-o",
        "name",
    ],
    LIST,
];

#[test]
fn kubectl_lite_refuses_prune_flags_as_kubectl_does() {
    compare(REFUSED);
}

/// Fails listing every step of `script` whose masked output or exit code differs between
/// kubectl-lite and the real kubectl, each against a server of its own.
fn compare(script: &[&[&str]]) {
    let setup = |s: &ApiServer| write_files(s.dir());
    let differences = e2e::apiserver::script_differences(script, setup, mask).unwrap();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Masks server addresses and klog's lines (kubectl logs some warnings through klog).
fn mask(bytes: &[u8]) -> String {
    let port = regex::Regex::new(r"127\.0\.0\.1:\d+").unwrap();
    let klog = regex::Regex::new(r"(?m)^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ .*\n").unwrap();
    let t = String::from_utf8_lossy(bytes).replace("kubectl-lite ", "kubectl ");
    let t = klog.replace_all(&t, "");
    port.replace_all(&t, "<server>").into_owned()
}
