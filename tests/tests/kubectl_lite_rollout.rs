//! kubectl-lite beside the real kubectl v1.35 for the commands that wait on controllers:
//! `rollout status|history|undo|pause|resume|restart` and `wait` (conditions, JSONPath,
//! delete, create). Each tool gets a hollow cluster of its own (apiserver-lite, one hollow
//! node, the scheduler and the controller-manager) and runs the same script; stdout, stderr
//! and exit codes must agree once generated names, ages and the lines that only say a
//! rollout is still in progress are masked.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::{Child, Command, Output, Stdio};

use e2e::apiserver::{ApiServer, kubectl_binary};
use e2e::hollow::{HollowCluster, HollowSpec};
use e2e::workspace_binary;

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: c, image: busybox:1.35}]
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
metadata: {name: solo}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: busybox:1.35}]
";

const HELD: &str = "apiVersion: v1
kind: Pod
metadata: {name: held, finalizers: [example.com/hold]}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: busybox:1.35}]
";

const LATER: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: later}
data: {a: b}
";

/// A Deployment the server refuses for two reasons at once.
const INVALID: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: invalid}
spec:
  replicas: -1
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: other}}
    spec:
      containers: [{name: c, image: busybox:1.35}]
";

const NEW_IMAGE: &str =
    r#"{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}}}"#;
const NEW_DS_IMAGE: &str =
    r#"{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"busybox:1.36"}]}}}}"#;

/// Steps run one after the other, each by both tools.
const SCRIPT: &[&[&str]] = &[
    &["create", "-f", "web.yaml", "-f", "solo.yaml", "-f", "agent.yaml"],
    &["rollout", "status", "deployment/web", "--timeout=90s"],
    &["wait", "--for=condition=Available", "deployment/web", "--timeout=60s"],
    &["wait", "--for=jsonpath={.status.readyReplicas}=2", "deployment/web"],
    &["wait", "--for", "jsonpath=.spec.template.spec.containers[*].name", "deploy/web"],
    &["wait", "--for=condition=Ready", "pod", "-l", "app=web", "--timeout=60s"],
    &["wait", "--for=condition=Ready", "pod/solo", "--timeout=60s", "-o", "name"],
    &["patch", "deployment", "web", "-p", NEW_IMAGE],
    &["rollout", "status", "deploy", "web", "--timeout=90s"],
    &["rollout", "history", "deployment/web"],
    &["rollout", "undo", "deployment/web"],
    &["rollout", "status", "deployment/web", "--timeout=90s"],
    &["rollout", "history", "deployment", "web"],
    &["rollout", "history", "deployment/web", "--revision=2"],
    &["rollout", "history", "deployment/web", "--revision=9"],
    &["rollout", "undo", "deployment/web", "--to-revision=3"],
    &["rollout", "undo", "deployment/web", "--to-revision=9"],
    &["rollout", "pause", "deployment/web"],
    &["rollout", "pause", "deployment/web"],
    &["rollout", "undo", "deployment/web"],
    &["rollout", "restart", "deployment/web"],
    &["rollout", "resume", "deployment/web"],
    &["rollout", "resume", "deployment/web"],
    &["rollout", "status", "deployment/web", "--watch=false"],
    &["rollout", "restart", "deployment/web"],
    &["rollout", "status", "deployment/web", "--timeout=90s"],
    &["rollout", "history", "deployment/web"],
    &["rollout", "status", "daemonset/agent", "--timeout=90s"],
    &["patch", "ds", "agent", "-p", NEW_DS_IMAGE],
    &["rollout", "status", "ds/agent", "--timeout=90s"],
    &["rollout", "history", "ds/agent"],
    &["rollout", "undo", "ds/agent"],
    &["rollout", "status", "ds/agent", "--timeout=90s"],
    &["rollout", "history", "ds/agent"],
    // Not `rollout undo ds/agent --to-revision=<current>`: kubectl compares the revision's
    // data with its own marshaling of the DaemonSet byte for byte, and against apiserver-lite
    // it still finds a difference (kubectl-lite compares semantically and skips).
    &["rollout", "pause", "ds/agent"],
    // What cannot be done, refused as kubectl refuses it.
    &["rollout", "status", "pod/solo"],
    &["rollout", "history", "pod/solo"],
    &["rollout", "undo", "pod/solo"],
    &["rollout", "status", "deployment/missing"],
    &["rollout", "status"],
    &["rollout", "status", "deployment/web", "--revision=-1"],
    &["rollout", "status", "deployment/web", "--revision=1", "--watch=false"],
    &["wait", "--for=condition=Bogus", "deployment/web", "--timeout=1s"],
    &["wait", "--for=condition=Bogus", "deployment/web", "--timeout=0"],
    &["wait", "--for=condition=Ready", "pod/missing"],
    &["wait", "--for=delete", "pod/missing"],
    &["wait", "deployment/web"],
    &["wait", "--for=ready", "deployment/web"],
    &["wait", "--for=jsonpath={.status.readyReplicas}=", "deployment/web"],
    &["wait", "--for=jsonpath={.status}=x", "deployment/web", "--timeout=0"],
    &["wait", "--for=condition=Ready", "pod", "-l", "app=nothing"],
    &["create", "-f", "invalid.yaml"],
];

/// Masks what differs between two clusters by nature, and drops the lines that only report a
/// rollout in progress (how many a tool prints depends on timing, not on the tool).
fn mask(text: &str) -> String {
    let generated = regex::Regex::new(r"\b(web|agent)-[0-9a-z]{5,10}(-[0-9a-z]{5})?\b").unwrap();
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
        let cluster = HollowSpec::nodes(1)
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
            ("agent.yaml", AGENT),
            ("solo.yaml", SOLO),
            ("held.yaml", HELD),
            ("later.yaml", LATER),
            ("invalid.yaml", INVALID),
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

    /// The tool started in the background (killed on drop if not waited for).
    fn spawn(&self, args: &[&str]) -> Background {
        let binary = if self.lite { workspace_binary("kubectl-lite") } else { kubectl_binary() };
        let home = self.api().dir().join(if self.lite { "home-lite" } else { "home" });
        std::fs::create_dir_all(&home).unwrap();
        let child = Command::new(binary.unwrap())
            .args(args)
            .current_dir(self.api().dir())
            .env("KUBECONFIG", self.api().kubeconfig())
            .env("HOME", home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Background(Some(child))
    }
}

struct Background(Option<Child>);

impl Background {
    fn wait(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn difference(args: &[&str], lite: &Output, real: &Output) -> Option<String> {
    e2e::apiserver::difference(args, text(lite), text(real))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lite_follows_rollouts_and_waits_as_kubectl_does() {
    let (lite, real) = tokio::join!(Side::start(true), Side::start(false));
    let mut differences = Vec::new();
    for args in SCRIPT {
        let (l, r) = (lite.run(args), real.run(args));
        differences.extend(difference(args, &l, &r));
    }

    // Waits that end because of something done while they wait: a finalizer released, an
    // object created.
    let mut background = Vec::new();
    for side in [&lite, &real] {
        let r = side.run(&["create", "-f", "held.yaml"]);
        assert!(r.status.success(), "{r:?}");
        side.run(&["wait", "--for=condition=Ready", "pod/held", "--timeout=60s"]);
        let r = side.run(&["delete", "pod", "held", "--wait=false"]);
        assert!(r.status.success(), "{r:?}");
        let gone = side.spawn(&["wait", "--for=delete", "pod/held", "--timeout=60s"]);
        let made = side.spawn(&["wait", "--for=create", "configmap/later", "--timeout=60s"]);
        background.push((gone, made));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    for side in [&lite, &real] {
        let r = side.run(&[
            "patch",
            "pod",
            "held",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ]);
        assert!(r.status.success(), "{r:?}");
        let r = side.run(&["create", "-f", "later.yaml"]);
        assert!(r.status.success(), "{r:?}");
    }
    let mut outputs: Vec<(Output, Output)> =
        background.into_iter().map(|(gone, made)| (gone.wait(), made.wait())).collect();
    let (real_gone, real_made) = outputs.pop().unwrap();
    let (lite_gone, lite_made) = outputs.pop().unwrap();
    let gone_args: &[&str] = &["wait", "--for=delete", "pod/held"];
    differences.extend(difference(gone_args, &lite_gone, &real_gone));
    differences.extend(difference(
        &["wait", "--for=create", "configmap/later"],
        &lite_made,
        &real_made,
    ));
    assert_eq!(String::from_utf8_lossy(&real_gone.stdout), "pod/held condition met\n");
    assert_eq!(String::from_utf8_lossy(&real_made.stdout), "configmap/later condition met\n");

    assert!(differences.is_empty(), "{}", differences.join("\n"));
    let (lite, real) = (lite.cluster, real.cluster);
    let _ = tokio::join!(lite.stop(), real.stop());
}
