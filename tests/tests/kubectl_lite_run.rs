//! `kubectl-lite run` attached, beside the real kubectl v1.35, with a kubelet on real
//! containerd: `-i --rm --restart=Never` with piped stdin (the container's exit code becomes
//! the command's, the pod is deleted after), `--expose` with `--rm`, `--attach` without stdin,
//! `-q`, a pod that never starts (the running timeout, then the removal), and the flag
//! combinations kubectl refuses. The scheduler places the pods.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::process::Output;
use std::time::Duration;

use e2e::apiserver::ApiServer;
use e2e::cluster::JoinedNode;
use e2e::require;
use e2e::scheduler::Scheduler;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

const NODE: &str = "node-a";
const BOUND: Duration = Duration::from_secs(120);

/// Runs `args` (where `{}` stands for the pod's name) through one tool with `input` on stdin;
/// (stdout, stderr, exit code) with the tool's own pod name put back as `{}`.
fn run(api: &ApiServer, lite: bool, name: &str, args: &[&str], input: &[u8]) -> Seen {
    let own = format!("{name}-{}", if lite { "lite" } else { "real" });
    let args: Vec<String> = args.iter().map(|a| a.replace("{}", &own)).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o: Output = api.kubectl_with_stdin(lite, &args, input, BOUND).unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).replace(&own, "{}");
    (text(&o.stdout), text(&o.stderr), o.status.code())
}

type Seen = (String, String, Option<i32>);

/// Both tools, each on a pod of its own; asserts they said and exited the same, and returns it.
fn same(api: &ApiServer, name: &str, args: &[&str], input: &[u8]) -> Seen {
    let lite = run(api, true, name, args, input);
    let real = run(api, false, name, args, input);
    assert_eq!(lite, real, "kubectl {args:?}");
    lite
}

const NOTICE: &str = "All commands and output from this session will be recorded in container logs, including credentials and sensitive information passed through the command prompt.\nIf you don't see a command prompt, try pressing enter.\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lite_run_attached_does_what_kubectl_does() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let api = &cluster.api;
    // `run` makes pods without a node: the scheduler places them.
    let scheduler = Scheduler::start(api, &[]).unwrap();
    let image = "--image=busybox:1.35";

    // stdin in, the exit code out, the pod removed.
    let seen = same(
        api,
        "reader",
        &[
            "run",
            "{}",
            "-i",
            "--rm",
            "--restart=Never",
            image,
            "--",
            "sh",
            "-c",
            "read x; echo got $x; exit 3",
        ],
        b"hi\n",
    );
    let removed = "pod \"{}\" deleted from default namespace\n";
    assert_eq!(
        seen,
        (
            format!("got hi\n{removed}"),
            format!("{NOTICE}pod default/{{}} terminated (Error)\n"),
            Some(3)
        ),
        "{}",
        cluster.logs("reader")
    );
    // The end of stdin reaches the container (stdinOnce); success exits 0.
    let seen = same(
        api,
        "cat",
        &["run", "{}", "-i", "--rm", "--restart=Never", image, "--", "cat"],
        b"one\ntwo\n",
    );
    assert_eq!(seen, (format!("one\ntwo\n{removed}"), NOTICE.to_string(), Some(0)));
    // --expose: the Service made after the pod and said before the session; both removed.
    let seen = same(
        api,
        "exposed",
        &[
            "run",
            "{}",
            "-i",
            "--rm",
            "--restart=Never",
            "--port=80",
            "--expose",
            image,
            "--",
            "cat",
        ],
        b"x\n",
    );
    let service_removed = "service \"{}\" deleted from default namespace\n";
    assert_eq!(
        seen,
        (
            format!("service/{{}} created\nx\n{removed}{service_removed}"),
            NOTICE.to_string(),
            Some(0)
        )
    );
    // Quiet: no notices, no removal line.
    let seen = same(
        api,
        "quiet",
        &[
            "run",
            "{}",
            "-q",
            "-i",
            "--rm",
            "--restart=Never",
            image,
            "--",
            "sh",
            "-c",
            "cat; exit 0",
        ],
        b"q\n",
    );
    assert_eq!(seen, ("q\n".to_string(), String::new(), Some(0)));
    // --attach without stdin: the output followed, the pod kept.
    let seen = same(
        api,
        "attached",
        &[
            "run",
            "{}",
            "--attach",
            "--restart=Never",
            image,
            "--",
            "sh",
            "-c",
            "sleep 2; echo done",
        ],
        b"",
    );
    assert_eq!(seen, ("done\n".to_string(), NOTICE.to_string(), Some(0)));
    let pods: Api<Pod> = Api::namespaced(api.admin_client().await.unwrap(), "default");
    for name in ["attached-lite", "attached-real"] {
        assert!(pods.get_opt(name).await.unwrap().is_some(), "{name} is kept without --rm");
    }
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(api.admin_client().await.unwrap(), "default");
    for name in ["exposed-lite", "exposed-real"] {
        assert!(services.get_opt(name).await.unwrap().is_none(), "{name} is removed with --rm");
    }
    for name in ["reader-lite", "reader-real", "cat-lite", "cat-real"] {
        let gone = pods
            .get_opt(name)
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some());
        assert!(gone, "{name} is removed with --rm");
    }
    // A pod that never runs: the running timeout, then the removal all the same.
    let seen = same(
        api,
        "never",
        &[
            "run",
            "{}",
            "-i",
            "--rm",
            "--restart=Never",
            "--pod-running-timeout=3s",
            "--image=127.0.0.1:1/none:1",
            "--",
            "true",
        ],
        b"",
    );
    assert_eq!(
        seen,
        (removed.to_string(), "error: timed out waiting for the condition\n".to_string(), Some(1))
    );

    // Refused before anything is made.
    for args in [
        &["run", "{}", image, "-t"][..],
        &["run", "{}", image, "--rm"],
        &["run", "{}", image, "-i", "--attach=false", "--rm"],
        &["run", "{}", image, "-i", "--dry-run=client"],
        &["run", "{}", image, "-i", "--pod-running-timeout=0s"],
    ] {
        let (out, err, code) = same(api, "refused", args, b"");
        assert_eq!((out.as_str(), code), ("", Some(1)), "{args:?}: {err}");
    }
    drop(scheduler);
    cluster.stop().await.unwrap();
}
