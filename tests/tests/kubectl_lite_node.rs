//! kubectl-lite beside the real kubectl v1.35 where a kubelet answers: logs of a pod running on
//! real containerd, through apiserver-lite's `pods/log`; `describe` of that pod and of its node;
//! exec (exit codes, piped stdin, errors), port-forward to the pod's httpd, and cp both ways,
//! through `pods/exec` and `pods/portforward`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use e2e::apiserver::{ApiServer, kubectl_binary};
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
        "metadata": {"name": "talker", "labels": {"app": "talker"}},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": "busybox-httpd:1.35",
                 "command": ["sh", "-c", "echo line 1; echo line 2; sleep 0.5; echo on stderr >&2; exec httpd -f -p 80 -h /var/www"]},
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
        // By selector: the pods' logs, 10 lines from the end unless told.
        &["logs", "-l", "app=talker", "-c", "main"],
        &["logs", "-l", "app=talker", "-c", "main", "--prefix", "--tail=2"],
        &["logs", "-l", "app=talker", "--tail=1"],
        &["logs", "-l", "app=talker", "-c", "main", "--tail=-1"],
        &["logs", "-l", "app=none"],
        &["logs", "-l", "app=talker", "-c", "nope"],
        &["logs", "-l", "app=talker", "talker"],
        &["logs", "-l", "app=talker", "--all-containers", "-c", "main"],
        &["logs", "-l", "app=talker", "-f", "--all-containers", "--max-log-requests=1"],
    ] {
        let l = api.kubectl_lite(args).unwrap();
        let r = api.kubectl(args).unwrap();
        // Help lines name the command run.
        let lite_err = text(&l.stderr).replace("kubectl-lite ", "kubectl ");
        assert_eq!(
            (text(&l.stdout), lite_err, l.status.code()),
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

    // -f -l over several containers: every stream at once, whole lines, each with its source.
    let mut follow = Command::new(workspace_binary("kubectl-lite").unwrap())
        .args(["logs", "-f", "-l", "app=talker", "--all-containers", "--prefix", "--tail=3"])
        .env("KUBECONFIG", api.kubeconfig())
        .env("HOME", api.dir().join("home-lite"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let mut seen_main = false;
    let mut ticks = 0;
    while !(seen_main && ticks >= 5) {
        let line = lines.next().unwrap().unwrap();
        if line.starts_with("[pod/talker/main] ") {
            seen_main = true;
        } else {
            assert!(line.starts_with("[pod/talker/ticker] tick "), "{line:?}");
            ticks += 1;
        }
    }
    follow.kill().unwrap();
    follow.wait().unwrap();

    cluster.stop().await.unwrap();
}

/// What busybox-httpd's page says.
const PAGE: &str = "It works: busybox httpd standing in for nginx";

/// kubectl (`lite: false`) or kubectl-lite against the cluster, each with its own HOME, its
/// streams piped.
fn client(api: &ApiServer, lite: bool, args: &[&str]) -> Command {
    let (bin, home) = if lite {
        (workspace_binary("kubectl-lite").unwrap(), "home-lite")
    } else {
        (kubectl_binary().unwrap(), "home")
    };
    let mut c = Command::new(bin);
    c.args(args)
        .current_dir(api.dir())
        .env("KUBECONFIG", api.kubeconfig())
        .env("HOME", api.dir().join(home))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs a client with `input` on its stdin, bounded.
fn with_stdin(api: &ApiServer, lite: bool, args: &[&str], input: &[u8]) -> Output {
    api.kubectl_with_stdin(lite, args, input, Duration::from_secs(60)).unwrap()
}

/// (stdout, stderr, exit code) as text.
fn seen(o: &Output) -> (String, String, Option<i32>) {
    (text(&o.stdout), text(&o.stderr), o.status.code())
}

/// A running `port-forward`: its stdout lines as they come.
struct Forward {
    child: Child,
    lines: Receiver<String>,
}

impl Forward {
    fn start(api: &ApiServer, lite: bool, args: &[&str]) -> Forward {
        let mut child = client(api, lite, args).stdin(Stdio::null()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Forward { child, lines }
    }

    /// The next stdout line, bounded.
    fn line(&mut self) -> String {
        match self.lines.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => l,
            Err(e) => {
                let _ = self.child.kill();
                let mut err = String::new();
                let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("no line from port-forward ({e}): {err}")
            }
        }
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /` over a fresh connection to 127.0.0.1:`port`: the whole response.
fn http_get(port: u16) -> String {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    conn.write_all(b"GET / HTTP/1.0\r\nHost: talker\r\n\r\n").unwrap();
    let mut out = Vec::new();
    conn.read_to_end(&mut out).unwrap();
    text(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lite_exec_port_forward_and_cp_do_what_kubectl_does() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.api.admin_client().await.unwrap(), "default");
    pods.create(&PostParams::default(), &pod()).await.unwrap();
    let api = &cluster.api;
    eventually("main runs commands", WAIT, POLL, || async {
        let o = api.kubectl(&["exec", "talker", "-c", "main", "--", "true"]).ok()?;
        o.status.success().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));

    // Output, exit code and errors as kubectl's, byte for byte.
    for args in [
        &["exec", "talker", "-c", "main", "--", "sh", "-c", "echo hi; exit 3"][..],
        &["exec", "talker", "-c", "main", "--", "sh", "-c", "echo out; echo err >&2"],
        &["exec", "talker", "--", "echo", "defaulted"],
        &["exec", "talker", "-q", "--", "echo", "quiet"],
        &["exec", "talker", "-c", "nope", "--", "true"],
        &["exec", "nope", "--", "true"],
        &["exec", "talker"],
        &["attach", "talker", "-c", "nope"],
        &["attach", "nope"],
        &["port-forward", "talker", "8080:nope"],
        &["port-forward", "nope", "80"],
        &["cp", "talker:/tmp/a", "nope:/tmp/b"],
        &["cp", "/nonexistent-local", "talker:/tmp/x", "-c", "main"],
    ] {
        let l = api.kubectl_lite(args).unwrap();
        let r = api.kubectl(args).unwrap();
        assert_eq!(seen(&l), seen(&r), "kubectl {args:?}");
    }

    // Piped stdin reaches the command, and its end does too; a large one comes back whole.
    for (args, input) in [
        (&["exec", "-i", "talker", "-c", "main", "--", "cat"][..], b"hi\nthere\n".to_vec()),
        (
            &["exec", "-i", "talker", "-c", "main", "--", "wc", "-c"],
            (0..20_000).flat_map(|i| format!("line {i}\n").into_bytes()).collect(),
        ),
        (
            &["exec", "-i", "talker", "-c", "main", "--", "sh", "-c", "read x; exit $x"],
            b"7\n".to_vec(),
        ),
    ] {
        let l = with_stdin(api, true, args, &input);
        let r = with_stdin(api, false, args, &input);
        assert_eq!(seen(&l), seen(&r), "kubectl {args:?}");
    }
    let cat = with_stdin(api, true, &["exec", "-i", "talker", "-c", "main", "--", "cat"], b"x\n");
    assert_eq!(seen(&cat), ("x\n".into(), String::new(), Some(0)));

    // port-forward: the same lines (but for the random local port) and the pod's page.
    for lite in [true, false] {
        let mut fwd = Forward::start(api, lite, &["port-forward", "pod/talker", ":80"]);
        let first = fwd.line();
        let port: u16 = first
            .strip_prefix("Forwarding from 127.0.0.1:")
            .and_then(|r| r.strip_suffix(" -> 80"))
            .unwrap_or_else(|| panic!("{first}"))
            .parse()
            .unwrap();
        assert_eq!(fwd.line(), format!("Forwarding from [::1]:{port} -> 80"), "lite {lite}");
        for _ in 0..2 {
            let page = tokio::task::spawn_blocking(move || http_get(port)).await.unwrap();
            assert!(page.starts_with("HTTP/1.") && page.contains(PAGE), "lite {lite}: {page}");
            assert_eq!(fwd.line(), format!("Handling connection for {port}"), "lite {lite}");
        }
    }

    // cp in, to a path and into a directory, and out again; the remote tar's notice on stdout.
    let local = api.dir().join("greeting.txt");
    std::fs::write(&local, "hello from cp\n").unwrap();
    let local = local.to_str().unwrap();
    for (lite, name) in [(true, "lite"), (false, "real")] {
        let to_file = format!("talker:/tmp/{name}.txt");
        let o = client(api, lite, &["cp", local, &to_file, "-c", "main"]).output().unwrap();
        assert_eq!(seen(&o), (String::new(), String::new(), Some(0)), "{name}");
        std::fs::create_dir_all(api.dir().join(name)).unwrap();
        let mkdir = api.kubectl(&[
            "exec",
            "talker",
            "-c",
            "main",
            "--",
            "mkdir",
            "-p",
            &format!("/tmp/{name}"),
        ]);
        assert!(mkdir.unwrap().status.success());
        let to_dir = format!("talker:/tmp/{name}");
        let o = client(api, lite, &["cp", local, &to_dir, "-c", "main"]).output().unwrap();
        assert_eq!(seen(&o), (String::new(), String::new(), Some(0)), "{name}");
    }
    for path in ["/tmp/lite.txt", "/tmp/lite/greeting.txt"] {
        let o = api.kubectl(&["exec", "talker", "-c", "main", "--", "cat", path]).unwrap();
        assert_eq!(text(&o.stdout), "hello from cp\n", "{path}");
    }
    let out_lite = api.dir().join("out-lite.txt");
    let out_real = api.dir().join("out-real.txt");
    let l = client(
        api,
        true,
        &["cp", "talker:/tmp/real.txt", out_lite.to_str().unwrap(), "-c", "main"],
    )
    .output()
    .unwrap();
    let r = client(
        api,
        false,
        &["cp", "talker:/tmp/lite.txt", out_real.to_str().unwrap(), "-c", "main"],
    )
    .output()
    .unwrap();
    // The remote tar's notice goes to stdout; kubectl may exit before it arrives (it stops at
    // the archive's end), kubectl-lite waits for the command's end and prints it.
    let notice = "tar: removing leading '/' from member names\n";
    assert_eq!(seen(&l), (notice.into(), String::new(), Some(0)));
    assert!(["", notice].contains(&text(&r.stdout).as_str()), "{:?}", seen(&r));
    assert_eq!((text(&r.stderr), r.status.code()), (String::new(), Some(0)));
    assert_eq!(std::fs::read_to_string(&out_lite).unwrap(), "hello from cp\n");
    assert_eq!(std::fs::read_to_string(&out_real).unwrap(), "hello from cp\n");
    // A directory comes out whole; a missing remote path fails as kubectl's does.
    let dir_lite = api.dir().join("dir-lite");
    let o =
        client(api, true, &["cp", "talker:/tmp/lite", dir_lite.to_str().unwrap(), "-c", "main"])
            .output()
            .unwrap();
    assert!(o.status.success(), "{:?}", seen(&o));
    assert_eq!(std::fs::read_to_string(dir_lite.join("greeting.txt")).unwrap(), "hello from cp\n");
    // kubectl stops at the archive's end: the remote tar's complaint is printed, the copy
    // exits 0.
    let missing = ["cp", "talker:/tmp/missing", "unused", "-c", "main"];
    let l = client(api, true, &missing).output().unwrap();
    let r = client(api, false, &missing).output().unwrap();
    assert_eq!((text(&l.stderr), l.status.code()), (text(&r.stderr), r.status.code()));
    assert!(text(&l.stdout).starts_with("tar: /tmp/missing: No such file or directory\n"));
    assert!(text(&l.stdout).starts_with(&text(&r.stdout)), "{:?} {:?}", seen(&l), seen(&r));

    cluster.stop().await.unwrap();
}
