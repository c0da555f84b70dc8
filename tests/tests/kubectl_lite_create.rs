//! kubectl-lite beside the real kubectl v1.35 for `create`'s generators and `run`: one script
//! run through each against its own apiserver-lite — objects created for real, printed with
//! `--dry-run=client -o yaml|json|name`, sent with `--dry-run=server`, refused for bad input
//! or because they exist — stdout, stderr and exit codes compared after masking what differs
//! by nature (UIDs, timestamps, resource versions, random container-name suffixes, klog
//! headers).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Output;

use e2e::apiserver::ApiServer;

const DRY: &str = "--dry-run=client";

/// Steps run one after the other, each by both tools.
const SCRIPT: &[&[&str]] = &[
    // deployment
    &["create", "deployment", "web", "--image=nginx:1.8", "--replicas=2", "--port=80"],
    &["create", "deployment", "web", "--image=nginx:1.8"],
    &["create", "deployment", "cmd", "--image=busybox", DRY, "-o", "yaml", "--", "sleep", "10"],
    &["create", "deployment", "cmd", "--image=busybox", DRY, "-o", "json", "--save-config"],
    &["create", "deployment", "cmd", "--image=busybox", "--dry-run=server"],
    &["create", "deployment", "cmd", "--image=busybox", "-n", "kube-system", DRY, "-o", "name"],
    &["create", "deployment", "cmd", DRY],
    &["create", "deployment", "a", "b", "--image=x", DRY],
    &["create", "deployment", "m", "--image=a", "--image=b", DRY, "--", "x"],
    &["get", "deployment", "web", "-o", "yaml"],
    // namespace, serviceaccount
    &["create", "namespace", "team-a"],
    &["create", "ns", "team-a"],
    &["create", "namespace", "team-b", DRY, "-o", "yaml"],
    &["create", "serviceaccount", "robot", "-n", "team-a"],
    &["create", "sa", "robot", "-n", "team-a", "-o", "yaml"],
    &["create", "sa", "other", "-o", "yaml"],
    // configmap
    &[
        "create",
        "configmap",
        "c1",
        "--from-literal=a=b",
        "--from-file=f.txt",
        "--from-file=k=f.txt",
    ],
    &["create", "configmap", "c2", "--from-file=dir", "--from-env-file=e.env"],
    &["create", "configmap", "c3", "--from-env-file=e.env", "-o", "yaml"],
    &["create", "configmap", "c4", "--from-file=dir", DRY, "-o", "json"],
    &["create", "configmap", "c5", "--from-literal=a", DRY],
    &["create", "configmap", "c5", "--from-literal=a=1", "--from-literal=a=2", DRY],
    &["create", "configmap", "c5", "--from-file=missing.txt", DRY],
    &["create", "configmap", "c5", "--from-file=k=dir", DRY],
    &["create", "configmap", "c1", "--from-literal=a=b"],
    &["create", "configmap", "hashed", "--from-file=dir", "--append-hash"],
    &["create", "secret", "generic", "hashed", "--from-literal=a=b", "--append-hash", "-o", "name"],
    // secrets
    &["create", "secret", "generic", "s1", "--from-literal=password=hunter2", "--type=Opaque"],
    &["create", "secret", "generic", "s2", "--from-file=f.txt", DRY, "-o", "yaml"],
    &["create", "secret", "generic", "s1", "--from-literal=a=b"],
    &["create", "secret", "tls", "t1", DRY],
    &["create", "secret", "tls", "t1", "--cert=missing.crt", "--key=missing.key", DRY],
    &[
        "create",
        "secret",
        "docker-registry",
        "d1",
        "--docker-username=u",
        "--docker-password=p",
        "--docker-email=e@x",
    ],
    &["create", "secret", "docker-registry", "d2", DRY],
    // services
    &["create", "service", "clusterip", "svc1", "--tcp=80:8080", "--tcp=443"],
    &["create", "service", "clusterip", "headless", "--clusterip=None", DRY, "-o", "yaml"],
    &["create", "service", "nodeport", "np", "--tcp=80:http", DRY, "-o", "json"],
    &["create", "service", "loadbalancer", "lb", "--tcp=80", DRY, "-o", "yaml"],
    &["create", "service", "externalname", "ext", "--external-name=example.com"],
    &["create", "service", "externalname", "ext2", DRY],
    &["create", "service", "clusterip", "bad", "--tcp=abc", DRY],
    &["create", "service", "clusterip", "bad", "--tcp=80:0", DRY],
    &["create", "service", "clusterip", "bad", DRY],
    &["create", "service", "clusterip", "svc1", "--tcp=80"],
    // job, cronjob
    &["create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", "--", "date"],
    &["create", "cronjob", "tock", "--image=busybox", DRY, "-o", "json"],
    &["create", "job", "once", "--image=busybox", "--", "echo", "hi"],
    &["create", "job", "manual", "--from=cronjob/tick"],
    &["create", "job", "manual2", "--from=cronjob/tick", DRY, "-o", "yaml"],
    &["create", "job", "manual2", "--from=deployment/web", DRY],
    &["create", "job", "manual2", "--from=cronjob/nope", DRY],
    &["create", "job", "nothing", DRY],
    &["create", "job", "both", "--from=cronjob/tick", "--", "echo", DRY],
    &["create", "job", "once", "--image=busybox", DRY, "-o", "yaml"],
    // rbac
    &["create", "role", "reader", "--verb=get,list", "--resource=pods,deployments.apps"],
    &[
        "create",
        "role",
        "one",
        "--verb=get",
        "--resource=pods",
        "--resource-name=a",
        DRY,
        "-o",
        "yaml",
    ],
    &["create", "role", "bad", "--verb=get", "--resource=nosuchthing", DRY],
    &["create", "role", "bad", "--verb=bind", "--resource=pods", DRY],
    &["create", "role", "bad", "--verb=fly", "--resource=pods", DRY, "-o", "name"],
    &["create", "role", "bad", "--resource=pods", DRY],
    &[
        "create",
        "clusterrole",
        "urls",
        "--verb=get",
        "--non-resource-url=/healthz",
        DRY,
        "-o",
        "yaml",
    ],
    &["create", "clusterrole", "podr", "--verb=get", "--resource=pods/log"],
    &["create", "clusterrole", "bad", "--verb=list", "--non-resource-url=/x", DRY],
    &[
        "create",
        "rolebinding",
        "rb",
        "--role=reader",
        "--user=alice",
        "--serviceaccount=team-a:robot",
    ],
    &["create", "rolebinding", "rb2", "--clusterrole=view", "--group=devs", DRY, "-o", "yaml"],
    &["create", "rolebinding", "rb3", DRY],
    &["create", "rolebinding", "rb3", "--role=a", "--serviceaccount=robot", DRY],
    &["create", "clusterrolebinding", "crb", "--clusterrole=view", "--user=bob"],
    &["create", "clusterrolebinding", "crb2", DRY],
    // output and flag checks
    &["create", "namespace", "x", "--dry-run=maybe"],
    &["create", "namespace", "x", DRY, "-o", "wide"],
    &["create", "namespace", "x", DRY, "-o", "jsonpath={.metadata.name}"],
    &["create"],
    // run
    &["run", "p1", "--image=nginx:1.8", "--port=80", "--env=A=1", "--labels=x=y,z=w"],
    &["run", "p1", "--image=nginx:1.8"],
    &[
        "run",
        "p2",
        "--image=busybox",
        "--restart=Never",
        "--command",
        DRY,
        "-o",
        "yaml",
        "--",
        "sh",
        "-c",
        "true",
    ],
    &["run", "p3", "--image=busybox", DRY, "-o", "json", "--", "arg1"],
    &["run", "p4", "--image=busybox", "--dry-run=server"],
    &["run", "p5", "--image=busybox", "--restart=Sometimes", DRY],
    &["run", "p5", "--image=busybox", "--env=NOEQ", DRY],
    &["run", "--image=busybox", DRY],
    &["get", "pod", "p1", "-o", "yaml"],
    // what the script made, seen through the same reader
    &["get", "configmaps,secrets,services,jobs,cronjobs,roles,rolebindings", "-o", "name"],
    &["get", "configmap", "c2", "-o", "yaml"],
    &["get", "job", "manual", "-o", "jsonpath={.metadata.annotations}"],
];

/// Masks what differs between two servers by nature.
fn mask(text: &str) -> String {
    let rules = [
        (r#"(resourceVersion|creationTimestamp|time): "[^"]*""#, "$1: <masked>"),
        (r"(uid): [0-9a-f-]{36}", "$1: <masked>"),
        (r"(clusterIP): \d+\.\d+\.\d+\.\d+", "$1: <masked>"),
        (
            r#""(uid|resourceVersion|creationTimestamp|time|clusterIP)": "[^"]*""#,
            "\"$1\": <masked>",
        ),
        (r"(?m)^(\s*)- (10|172)\.\d+\.\d+\.\d+$", "$1- <ip>"),
        (r"(?m)^E\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ ", "E<klog> "),
        (r"(?m)^W\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [a-z.]+:\d+\] ", "Warning: "),
        (r"\b(a|b)-([0-9a-z]{5})\b", "$1-<random>"),
        (r"127\.0\.0\.1:\d+", "<server>"),
        (r#"nodePort: \d+|"nodePort": \d+"#, "nodePort: <port>"),
    ];
    let mut t = text.replace("kubectl-lite", "kubectl");
    for (re, with) in rules {
        t = regex::Regex::new(re).unwrap().replace_all(&t, with).into_owned();
    }
    t
}

fn text(o: &Output) -> (String, String, Option<i32>) {
    (
        mask(&String::from_utf8_lossy(&o.stdout)),
        mask(&String::from_utf8_lossy(&o.stderr)),
        o.status.code(),
    )
}

fn start() -> ApiServer {
    let api = ApiServer::start().unwrap();
    let dir = api.dir();
    std::fs::write(dir.join("f.txt"), "a=1\n").unwrap();
    std::fs::write(dir.join("e.env"), "# settings\nX=1\nY=two words\n").unwrap();
    std::fs::create_dir_all(dir.join("dir")).unwrap();
    std::fs::write(dir.join("dir/k1"), "hello\n").unwrap();
    std::fs::write(dir.join("dir/k2"), "world\n").unwrap();
    api
}

fn difference(args: &[&str], lite: &Output, real: &Output) -> Option<String> {
    e2e::apiserver::difference(args, text(lite), text(real))
}

#[test]
fn kubectl_lite_generates_objects_as_kubectl_does() {
    let (lite, real) = (start(), start());
    let mut differences = Vec::new();
    let mut seen = Vec::new();
    for args in SCRIPT {
        let (l, r) = (lite.kubectl_lite(args).unwrap(), real.kubectl(args).unwrap());
        differences.extend(difference(args, &l, &r));
        seen.push((args, text(&r)));
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // The script did what it is about (against the real kubectl).
    let out =
        |step: &[&str]| seen.iter().find(|(a, _)| **a == step).map(|(_, t)| t.clone()).unwrap();
    assert_eq!(out(SCRIPT[0]).0, "deployment.apps/web created\n");
    assert_eq!(out(SCRIPT[1]).2, Some(1), "a second create is refused");
    assert!(out(&["get", "pod", "p1", "-o", "yaml"]).0.contains("containerPort: 80"));
    let dry = out(&["create", "namespace", "team-b", DRY, "-o", "yaml"]).0;
    assert!(
        dry.starts_with("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n"),
        "{dry}"
    );
}
