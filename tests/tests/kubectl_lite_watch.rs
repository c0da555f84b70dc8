//! kubectl-lite beside the real kubectl v1.35 for `get --watch`, `--watch-only` and
//! `--output-watch-events`: both tools watch one apiserver-lite at once, each bounded by
//! `--request-timeout`, while the test creates, labels and deletes pods; their stdout and exit
//! codes must agree once ages are masked (columns are compared as printed, alignment
//! included). Ctrl-C and the refusals (flags, types, missing objects) are compared too.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use e2e::apiserver::{ApiServer, difference, kubectl_binary};
use e2e::workspace_binary;

const SEED: &str = "apiVersion: v1
kind: Pod
metadata: {name: seed, labels: {app: w}}
spec:
  containers: [{name: c, image: busybox:1.35}]
";

const FRESH: &str = "apiVersion: v1
kind: Pod
metadata: {name: fresh, labels: {app: w}}
spec:
  containers: [{name: c, image: busybox:1.35}]
";

const OTHER_NS: &str = "apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: v1
kind: Pod
metadata: {name: elsewhere-with-a-long-name, namespace: other}
spec:
  containers: [{name: c, image: busybox:1.35}]
";

/// The watches, each run by both tools at once (a bound is added to each).
const WATCHES: &[&[&str]] = &[
    &["get", "pods", "-w"],
    &["get", "pods", "--watch-only"],
    &["get", "pods", "-w", "--output-watch-events"],
    &["get", "pods", "--watch-only", "--output-watch-events", "--no-headers"],
    &["get", "pods", "-w", "-l", "app=w", "-o", "name"],
    &["get", "pods", "-w", "-o", "json"],
    &["get", "pods", "-w", "-o", "yaml", "--output-watch-events"],
    &["get", "pods", "--watch-only", "-o", "json", "--output-watch-events"],
    &["get", "pod", "seed", "-w"],
    &["get", "pod/seed", "-w", "--output-watch-events"],
    &["get", "pods", "-A", "-w"],
    &["get", "pods", "-w", "-o", "wide", "--show-labels"],
    &["get", "pods", "-w", "-o", "custom-columns=NAME:.metadata.name,APP:.metadata.labels.app"],
];

/// What each watch sees while it runs.
const CHANGES: &[&[&str]] = &[
    &["create", "-f", "fresh.yaml"],
    &["label", "pod", "fresh", "tier=a-rather-long-label-value"],
    &["label", "pod", "seed", "x=y"],
    &["create", "-f", "other.yaml"],
    &["delete", "pod", "fresh"],
];

/// Refused before (or instead of) any watch, or watches the timeout ends at once: stdout,
/// stderr and exit codes compared.
const SHORT: &[&[&str]] = &[
    &["get", "pods", "-w", "--sort-by=.metadata.name", "--request-timeout=1s"],
    &["get", "pods", "--watch-only", "--sort-by=.metadata.name", "--request-timeout=1s"],
    &["get", "pods", "-w", "-o", "name", "--request-timeout=1"],
    &["get", "pods", "--output-watch-events"],
    &["get", "-w"],
    &["get", "pods,services", "-w"],
    &["get", "pod", "missing", "-w"],
    &["get", "nothings", "-w"],
];

/// How long each watch may run: the server's answer plus the changes fit well inside it.
const BOUND: &str = "--request-timeout=15s";
/// The changes must be done this long after the first watch began, or a watch may have ended
/// before seeing them all.
const CHANGES_WITHIN: Duration = Duration::from_secs(12);

/// A tool's watch as a child process: stderr read line by line (verbosity 6 shows when the
/// watch request went out), stdout collected when it ends.
struct Watcher {
    child: Child,
    stderr: mpsc::Receiver<String>,
    seen: String,
}

impl Watcher {
    fn spawn(binary: &Path, server: &ApiServer, home: &str, args: &[&str]) -> Watcher {
        let home = server.dir().join(home);
        std::fs::create_dir_all(&home).unwrap();
        let mut child = Command::new(binary)
            .args(args)
            .arg("-v=6")
            .current_dir(server.dir())
            .env("KUBECONFIG", server.kubeconfig())
            .env("HOME", home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watcher { child, stderr: rx, seen: String::new() }
    }

    /// Waits (bounded) until the watch request was sent.
    fn wait_watching(&mut self, args: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.seen.contains("watch=true") {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(_) => panic!("{args:?}: no watch within 20 s; stderr:\n{}", self.seen),
            }
        }
    }

    /// Waits (bounded; killed past it) for the end: exit code and stdout.
    fn finish(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        self.child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        (status.code(), out)
    }
}

/// Ages masked, with the padding after them (an age may be a digit wider in one tool's
/// output when a second turned between them; every other column keeps its own width).
fn mask(text: &str) -> String {
    let age = regex::Regex::new(r"\b\d+(s|m|h|d|y)(\d+(s|m|h|d))?\b *").unwrap();
    age.replace_all(text, "<age> ").into_owned()
}

fn setup() -> ApiServer {
    let server = ApiServer::start().unwrap();
    for (file, text) in [("seed.yaml", SEED), ("fresh.yaml", FRESH), ("other.yaml", OTHER_NS)] {
        std::fs::write(server.dir().join(file), text).unwrap();
    }
    let o = server.kubectl(&["create", "-f", "seed.yaml"]).unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    server
}

#[test]
fn kubectl_lite_watches_as_kubectl_does() {
    let server = setup();
    let (lite, real) = (workspace_binary("kubectl-lite").unwrap(), kubectl_binary().unwrap());
    let mut watchers = Vec::new();
    for (i, watch) in WATCHES.iter().enumerate() {
        let mut args = watch.to_vec();
        args.push(BOUND);
        let l = Watcher::spawn(&lite, &server, &format!("home-lite-{i}"), &args);
        let r = Watcher::spawn(&real, &server, &format!("home-{i}"), &args);
        watchers.push((args, l, r));
    }
    let mut first_watch: Option<Instant> = None;
    for (args, l, r) in &mut watchers {
        l.wait_watching(args);
        first_watch.get_or_insert_with(Instant::now);
        r.wait_watching(args);
    }
    // The last watch request sent is not yet necessarily being answered.
    std::thread::sleep(Duration::from_millis(500));
    for change in CHANGES {
        let o = server.kubectl(change).unwrap();
        assert!(o.status.success(), "{change:?}: {}", String::from_utf8_lossy(&o.stderr));
        // One event at a time: each watcher prints them in the order they happened.
        std::thread::sleep(Duration::from_millis(300));
    }
    let took = first_watch.map(|t| t.elapsed()).unwrap_or_default();
    assert!(took < CHANGES_WITHIN, "the changes took {took:?} after the first watch began");
    let mut differences = Vec::new();
    for (args, l, r) in watchers {
        let (lc, lo) = l.finish();
        let (rc, ro) = r.finish();
        let (lo, ro) = (mask(&lo), mask(&ro));
        // Every watch prints at least one of the changes.
        assert!(ro.lines().count() >= 2, "{args:?}: {ro}");
        differences.extend(difference(&args, (lo, String::new(), lc), (ro, String::new(), rc)));
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn kubectl_lite_ends_a_watch_on_sigint_as_kubectl_does() {
    let server = setup();
    let args = ["get", "pods", "-w"];
    let mut l = Watcher::spawn(&workspace_binary("kubectl-lite").unwrap(), &server, "l", &args);
    let mut r = Watcher::spawn(&kubectl_binary().unwrap(), &server, "r", &args);
    l.wait_watching(&args);
    r.wait_watching(&args);
    // Give both a moment past sending the request to be reading its answer.
    std::thread::sleep(Duration::from_millis(500));
    for w in [&l, &r] {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(w.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    }
    let (lc, lo) = l.finish();
    let (rc, ro) = r.finish();
    assert_eq!((lc, mask(&lo)), (rc, mask(&ro)));
    assert_eq!(rc, Some(1));
}

#[test]
fn kubectl_lite_refuses_and_times_out_watches_as_kubectl_does() {
    let server = setup();
    let mut differences = Vec::new();
    for args in SHORT {
        let l = server.kubectl_lite(args).unwrap();
        let r = server.kubectl(args).unwrap();
        let text = |b: &[u8]| mask(&String::from_utf8_lossy(b).replace("kubectl-lite", "kubectl"));
        differences.extend(difference(
            args,
            (text(&l.stdout), text(&l.stderr), l.status.code()),
            (text(&r.stdout), text(&r.stderr), r.status.code()),
        ));
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
