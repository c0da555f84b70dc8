//! kubectl-lite beside the real kubectl v1.35 for `drain` (with evictions through
//! apiserver-lite's `pods/eviction`), `cordon` and `uncordon`. Each tool gets a hollow cluster
//! of its own (apiserver-lite, two hollow nodes, the scheduler and the controller-manager)
//! and runs the same script: workloads placed on `hollow-0`, then drained from it one kind
//! at a time — a DaemonSet's pod (refused, then `--ignore-daemonsets`), a bare pod (refused,
//! then `--force`), a pod with emptyDir (refused, then `--delete-emptydir-data`), client
//! and server dry runs, a pod that cannot go (`--timeout`, then
//! `--skip-wait-for-delete-timeout`), a Deployment's pods evicted and rescheduled on
//! `hollow-1`, and `--disable-eviction`. stdout, stderr and exit codes must agree once
//! generated names and server addresses are masked.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Output;

use e2e::apiserver::ApiServer;
use e2e::hollow::{HollowCluster, HollowSpec};

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers: [{name: c, image: busybox:1.35}]
";

const CACHE: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: cache}
spec:
  replicas: 1
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      terminationGracePeriodSeconds: 5
      containers: [{name: c, image: busybox:1.35, volumeMounts: [{name: scratch, mountPath: /scratch}]}]
      volumes: [{name: scratch, emptyDir: {}}]
";

const AGENT: &str = "apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: a, image: busybox:1.35}]
";

const SOLO: &str = "apiVersion: v1
kind: Pod
metadata: {name: solo, labels: {app: solo}}
spec:
  terminationGracePeriodSeconds: 5
  containers: [{name: c, image: busybox:1.35}]
";

/// A pod a finalizer keeps once deleted.
const HELD: &str = "apiVersion: v1
kind: Pod
metadata: {name: held, labels: {app: held}, finalizers: [example.com/hold]}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: busybox:1.35}]
";

const RELEASE: &str = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;

/// Steps run one after the other, each by both tools.
const SCRIPT: &[&[&str]] = &[
    // Everything but the DaemonSet lands on hollow-0.
    &["cordon", "hollow-1"],
    &["create", "-f", "web.yaml", "-f", "cache.yaml", "-f", "solo.yaml", "-f", "held.yaml"],
    &["rollout", "status", "deployment/web", "--timeout=90s"],
    &["rollout", "status", "deployment/cache", "--timeout=90s"],
    &["wait", "--for=condition=Ready", "pod/solo", "pod/held", "--timeout=60s"],
    &["uncordon", "hollow-1"],
    &["uncordon", "hollow-1"],
    &["create", "-f", "agent.yaml"],
    &["rollout", "status", "daemonset/agent", "--timeout=90s"],
    // What cannot be drained at all.
    &["drain"],
    &["drain", "missing"],
    &["drain", "hollow-0", "-l", "x=y"],
    &["drain", "hollow-0", "--pod-selector=app in"],
    &["drain", "hollow-0", "--dry-run=maybe"],
    // One kind of pod at a time: refused, then let through.
    &["drain", "hollow-0", "--pod-selector=app=agent"],
    &["drain", "hollow-0", "--pod-selector=app=agent", "--ignore-daemonsets"],
    &["drain", "hollow-0", "--pod-selector=app=solo"],
    &["drain", "hollow-0", "--pod-selector=app=solo", "--force"],
    &["drain", "hollow-0", "--pod-selector=app=cache"],
    &["drain", "hollow-0", "--pod-selector=app=cache", "--delete-emptydir-data"],
    &["drain", "hollow-0", "--pod-selector=app=web", "--dry-run=client"],
    &["drain", "hollow-0", "--pod-selector=app=web", "--dry-run=server"],
    // A pod that does not go: the drain gives up; later it is no longer waited for.
    &["drain", "hollow-0", "--pod-selector=app=held", "--force", "--timeout=3s"],
    &[
        "drain",
        "hollow-0",
        "--pod-selector=app=held",
        "--force",
        "--skip-wait-for-delete-timeout=1",
    ],
    &["patch", "pod", "held", "--type=json", "-p", RELEASE],
    // The Deployment's pods evicted, their replacements on hollow-1.
    &["drain", "hollow-0", "--ignore-daemonsets", "--grace-period=2"],
    &["rollout", "status", "deployment/web", "--timeout=90s"],
    &["get", "pods", "-l", "app=web", "-o", "custom-columns=NODE:.spec.nodeName", "--no-headers"],
    &["uncordon", "hollow-0"],
    // Deleted instead of evicted.
    &["drain", "hollow-1", "--pod-selector=app=web", "--disable-eviction", "--grace-period=1"],
    &["uncordon", "hollow-1", "--dry-run=client"],
    &["uncordon", "hollow-1"],
    &["rollout", "status", "deployment/web", "--timeout=90s"],
];

/// Masks what differs between two clusters by nature.
fn mask(text: &str) -> String {
    let generated =
        regex::Regex::new(r"\b(web|agent|cache)-[0-9a-z]{5,10}(-[0-9a-z]{5})?\b").unwrap();
    let port = regex::Regex::new(r"127\.0\.0\.1:\d+").unwrap();
    let t = text.replace("kubectl-lite ", "kubectl ");
    let t = generated.replace_all(&t, "$1-<generated>");
    let t = port.replace_all(&t, "<server>");
    t.lines()
        .filter(|l| !l.starts_with("Waiting for ") && !l.starts_with("waiting for "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn text(o: &Output) -> (String, String, Option<i32>) {
    (
        mask(&String::from_utf8_lossy(&o.stdout)),
        mask(&String::from_utf8_lossy(&o.stderr)),
        o.status.code(),
    )
}

/// One cluster and the tool that drives it.
struct Side {
    cluster: HollowCluster,
    lite: bool,
}

impl Side {
    async fn start(lite: bool) -> Side {
        let port = e2e::ports::free_port().unwrap();
        let port = port.to_string();
        let cluster = HollowSpec::nodes(2)
            .scheduler()
            .companion(
                "controller-manager",
                &["--bind-address", "127.0.0.1", "--secure-port", &port],
            )
            .start()
            .await
            .unwrap();
        cluster.wait_ready(std::time::Duration::from_secs(60)).await.unwrap();
        let dir = cluster.api().dir().to_path_buf();
        for (name, body) in [
            ("web.yaml", WEB),
            ("cache.yaml", CACHE),
            ("agent.yaml", AGENT),
            ("solo.yaml", SOLO),
            ("held.yaml", HELD),
        ] {
            std::fs::write(dir.join(name), body).unwrap();
        }
        Side { cluster, lite }
    }

    fn api(&self) -> &ApiServer {
        self.cluster.api()
    }

    fn run(&self, args: &[&str]) -> Output {
        if self.lite { self.api().kubectl_lite(args) } else { self.api().kubectl(args) }.unwrap()
    }
}

fn difference(args: &[&str], lite: &Output, real: &Output) -> Option<String> {
    e2e::apiserver::difference(args, text(lite), text(real))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lite_drains_nodes_as_kubectl_does() {
    let (lite, real) = tokio::join!(Side::start(true), Side::start(false));
    let mut differences = Vec::new();
    let mut seen = Vec::new();
    for args in SCRIPT {
        let (l, r) = (lite.run(args), real.run(args));
        differences.extend(difference(args, &l, &r));
        seen.push((args, text(&r)));
    }
    // The script did what it is about (against the real kubectl, unmasked by the comparison).
    let out =
        |step: &[&str]| seen.iter().find(|(a, _)| **a == step).map(|(_, t)| t.clone()).unwrap();
    let evicted = out(&["drain", "hollow-0", "--ignore-daemonsets", "--grace-period=2"]);
    assert_eq!(
        evicted.0,
        "node/hollow-0 already cordoned\nevicting pod default/web-<generated>\nevicting pod default/web-<generated>\npod/web-<generated> evicted\npod/web-<generated> evicted\nnode/hollow-0 drained\n",
        "{evicted:?}"
    );
    let placed = out(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "custom-columns=NODE:.spec.nodeName",
        "--no-headers",
    ]);
    assert_eq!(placed.0, "hollow-1\nhollow-1\n", "the evicted pods come back on the other node");
    let refused = out(&["drain", "hollow-0", "--pod-selector=app=agent"]);
    assert_eq!(refused.2, Some(1), "{refused:?}");

    assert!(differences.is_empty(), "{}", differences.join("\n"));
    let (lite, real) = (lite.cluster, real.cluster);
    let _ = tokio::join!(lite.stop(), real.stop());
}
