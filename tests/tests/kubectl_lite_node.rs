//! kubectl-lite beside the real kubectl v1.35 where a kubelet answers: logs of a pod running on
//! real containerd, through apiserver-lite's `pods/log`; `describe` of that pod and of its node.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::{eventually, require, workspace_binary};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// Two containers: one that says three lines then serves, one that ticks every 200 ms.
fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "talker"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": "busybox-httpd:1.35",
                 "command": ["sh", "-c", "echo line 1; echo line 2; echo on stderr >&2; exec httpd -f -p 80 -h /var/www"]},
                {"name": "ticker", "image": "busybox:1.35",
                 "command": ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"]},
            ],
        },
    }))
    .unwrap()
}

/// Masks what two runs a moment apart may differ in: ages, times and the alignment they move.
fn mask(t: &str) -> String {
    let age = regex::Regex::new(r"\b\d+(s|m|h|d|y)(\d+(s|m|h|d))?\b").unwrap();
    let rfc1123 =
        regex::Regex::new(r"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}")
            .unwrap();
    let ws = regex::Regex::new(r" +").unwrap();
    let t = rfc1123.replace_all(t, "<time>");
    let t = age.replace_all(&t, "<age>");
    ws.replace_all(&t, " ").into_owned()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lite_logs_print_what_kubectl_logs_prints() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.api.admin_client().await.unwrap(), "default");
    pods.create(&PostParams::default(), &pod()).await.unwrap();
    let api = &cluster.api;
    eventually("main has logged", WAIT, POLL, || async {
        let o = api.kubectl(&["logs", "talker", "-c", "main"]).ok()?;
        text(&o.stdout).contains("on stderr").then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    // describe of the running pod and of its node: the same text once ages and times are
    // masked (the lease is renewed and events recorded between two runs: a few tries).
    for args in [&["describe", "pod", "talker"][..], &["describe", "node", NODE]] {
        let mut last = String::new();
        let mut same = false;
        for _ in 0..5 {
            let l = api.kubectl_lite(args).unwrap();
            let r = api.kubectl(args).unwrap();
            let (lo, ro) = (mask(&text(&l.stdout)), mask(&text(&r.stdout)));
            assert_eq!(l.status.code(), r.status.code(), "kubectl {args:?}: {}", text(&l.stderr));
            if lo == ro {
                same = true;
                break;
            }
            last = format!("--- kubectl-lite\n{lo}--- kubectl\n{ro}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert!(same, "kubectl {args:?}:\n{last}");
    }
    // What makes it the running pod and the joined node, so the comparison is not of empties.
    let pod = mask(&text(&api.kubectl_lite(&["describe", "pod", "talker"]).unwrap().stdout));
    for want in ["Status: Running", "State: Running", "Ready: True", "Started: <time>"] {
        assert!(pod.contains(want), "{want:?} in:\n{pod}");
    }
    let node = mask(&text(&api.kubectl_lite(&["describe", "node", NODE]).unwrap().stdout));
    for want in [
        " Ready True ",
        "Non-terminated Pods: (1 in total)",
        " default talker ",
        "HolderIdentity: node-a",
    ] {
        assert!(node.contains(want), "{want:?} in:\n{node}");
    }

    // The same answers, byte for byte, for what does not change between two runs.
    for args in [
        &["logs", "talker", "-c", "main"][..],
        &["logs", "talker", "main"],
        &["logs", "pod/talker", "-c", "main", "--tail=1"],
        &["logs", "talker", "-c", "main", "--tail=1", "--timestamps"],
        &["logs", "talker", "-c", "main", "--limit-bytes=9"],
        &["logs", "talker", "-c", "main", "--prefix"],
        &["logs", "talker", "-c", "nope"],
        &["logs", "nope"],
        &["logs", "talker", "-c", "main", "--previous"],
    ] {
        let l = api.kubectl_lite(args).unwrap();
        let r = api.kubectl(args).unwrap();
        assert_eq!(
            (text(&l.stdout), text(&l.stderr), l.status.code()),
            (text(&r.stdout), text(&r.stderr), r.status.code()),
            "kubectl {args:?}"
        );
    }

    // Without -c: the first container, said on stderr, as kubectl does.
    let l = api.kubectl_lite(&["logs", "talker", "--tail=1"]).unwrap();
    assert_eq!(text(&l.stderr), "Defaulted container \"main\" out of: main, ticker\n");
    assert_eq!(text(&l.stdout), "on stderr\n");

    // -f streams what the container writes next, until killed.
    let mut follow = Command::new(workspace_binary("kubectl-lite").unwrap())
        .args(["logs", "-f", "talker", "-c", "ticker", "--tail=1"])
        .env("KUBECONFIG", api.kubeconfig())
        .env("HOME", api.dir().join("home-lite"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let n = |l: &str| l.strip_prefix("tick ").and_then(|n| n.parse::<u64>().ok()).unwrap();
    let (a, b, c) =
        (n(&first), n(&lines.next().unwrap().unwrap()), n(&lines.next().unwrap().unwrap()));
    assert!(a < b && b < c, "{a} {b} {c}");
    follow.kill().unwrap();
    follow.wait().unwrap();

    cluster.stop().await.unwrap();
}
