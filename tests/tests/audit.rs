//! Audit logging with the real kubectl v1.35 against apiserver-lite (`--audit-policy-file`,
//! `--audit-log-path`, rotation flags): one JSON line per request stage at the level the
//! policy gives; a Secret at `Metadata` leaves no data in the log; the log rotates at the size
//! limit keeping `--audit-log-maxbackup` files; a policy that does not parse stops the start
//! with the file and the line.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use e2e::apiserver::ApiServer;
use serde_json::Value;

const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: \"\", resources: [secrets]}]
- level: RequestResponse
  resources: [{group: \"\", resources: [configmaps]}]
  namespaces: [big]
- level: Request
  resources: [{group: \"\", resources: [configmaps]}]
- level: Metadata
  verbs: [get, list]
  resources: [{group: \"\", resources: [pods]}]
- level: Metadata
  verbs: [watch]
  resources: [{group: \"\", resources: [events]}]
- level: None
";

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn start(dir: &Path, extra: &[&str]) -> (ApiServer, PathBuf) {
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = dir.join("logs/audit.log");
    let mut flags = vec![
        "--audit-policy-file".to_string(),
        policy.display().to_string(),
        "--audit-log-path".to_string(),
        log.display().to_string(),
    ];
    flags.extend(extra.iter().map(|s| (*s).to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    (ApiServer::start_with(&flags).unwrap(), log)
}

#[test]
fn each_request_stage_is_one_line_at_the_policys_level_and_secrets_stay_out() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = start(dir.path(), &[]);
    let run = |args: &[&str]| {
        let r = api.kubectl_run(args).unwrap();
        assert!(r.ok, "kubectl {args:?}: {}", r.err);
        r
    };
    run(&["create", "secret", "generic", "s1", "--from-literal=password=hunter2-audit"]);
    run(&["create", "configmap", "c1", "--from-literal=colour=ultramarine"]);
    run(&["get", "pods"]);
    run(&["get", "namespaces"]);
    let all = events(&log);
    let by = |resource: &str, verb: &str| -> Vec<&Value> {
        all.iter().filter(|e| e["objectRef"]["resource"] == resource && e["verb"] == verb).collect()
    };
    let secret = by("secrets", "create");
    assert_eq!(secret.len(), 1, "one line per stage logged (RequestReceived omitted): {all:#?}");
    let s = secret[0];
    assert_eq!(s["level"], "Metadata");
    assert_eq!(s["stage"], "ResponseComplete");
    assert_eq!(s["user"]["username"], "admin");
    assert!(s["user"]["groups"].as_array().unwrap().contains(&"system:masters".into()));
    assert_eq!(s["objectRef"]["namespace"], "default");
    assert_eq!(s["objectRef"]["name"], "s1");
    assert_eq!(s["objectRef"]["apiVersion"], "v1");
    assert_eq!(s["responseStatus"]["code"], 201);
    assert_eq!(s["sourceIPs"][0], "127.0.0.1");
    assert!(s["userAgent"].as_str().unwrap().starts_with("kubectl/v1.35"), "{s}");
    assert!(s["auditID"].as_str().is_some_and(|id| id.len() == 36));
    assert!(
        s["requestReceivedTimestamp"].as_str().unwrap() <= s["stageTimestamp"].as_str().unwrap()
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("hunter2") && !text.contains("aHVudGVyMi1hdWRpdA"),
        "secret data logged"
    );

    let cm = by("configmaps", "create");
    assert_eq!(cm.len(), 1);
    assert_eq!(cm[0]["level"], "Request");
    assert_eq!(cm[0]["requestObject"]["data"]["colour"], "ultramarine");
    assert!(cm[0].get("responseObject").is_none());
    let pods = by("pods", "list");
    assert_eq!(pods.len(), 1);
    assert!(pods[0].get("requestObject").is_none());
    assert!(by("namespaces", "list").is_empty(), "level None: not logged");
    assert!(all.iter().all(|e| e["stage"] != "RequestReceived"));
}

#[test]
fn a_watch_logs_when_its_response_starts_and_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = start(dir.path(), &[]);
    let path = "/api/v1/namespaces/default/events?watch=1&timeoutSeconds=1";
    let r = api.kubectl_run(&["get", "--raw", path]).unwrap();
    assert!(r.ok, "{}", r.err);
    let watch: Vec<Value> = events(&log).into_iter().filter(|e| e["verb"] == "watch").collect();
    let stages: Vec<&str> = watch.iter().map(|e| e["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["ResponseStarted", "ResponseComplete"], "{watch:#?}");
    assert_eq!(watch[0]["auditID"], watch[1]["auditID"]);
    assert_eq!(watch[1]["responseStatus"]["code"], 200);
    let uri = watch[1]["requestURI"].as_str().unwrap();
    assert!(uri.starts_with("/api/v1/namespaces/default/events?"), "{uri}");
    assert!(uri.contains("watch=1") && uri.contains("timeoutSeconds=1"), "{uri}");
}

#[test]
fn the_log_rotates_at_the_size_limit_keeping_the_backups_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (api, log) = start(dir.path(), &["--audit-log-maxsize=1", "--audit-log-maxbackup=2"]);
    let r = api.kubectl_run(&["create", "namespace", "big"]).unwrap();
    assert!(r.ok, "{}", r.err);
    // Each create of a 300 KB ConfigMap in `big` logs its request and response objects
    // (~600 KB a line): a 1 MB log holds one line, so each create rotates.
    let payload = dir.path().join("payload");
    std::fs::write(&payload, "x".repeat(300 * 1024)).unwrap();
    let from = format!("--from-file=blob={}", payload.display());
    for i in 0..5 {
        let name = format!("big-{i}");
        let r = api.kubectl_run(&["create", "configmap", &name, "-n", "big", &from]).unwrap();
        assert!(r.ok, "{}", r.err);
    }
    let logs = log.parent().unwrap();
    let mut backups: Vec<String> = std::fs::read_dir(logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "audit.log")
        .collect();
    backups.sort();
    assert_eq!(backups.len(), 2, "--audit-log-maxbackup=2: {backups:?}");
    for b in &backups {
        assert!(b.starts_with("audit-") && b.ends_with(".log"), "{b}");
        let size = std::fs::metadata(logs.join(b)).unwrap().len();
        assert!(size <= 1024 * 1024, "{b} is {size} bytes");
    }
    let current = events(&log);
    let last = current.last().unwrap();
    assert_eq!(last["objectRef"]["name"], "big-4");
    assert_eq!(last["level"], "RequestResponse");
    assert_eq!(last["responseObject"]["metadata"]["name"], "big-4");
}

#[test]
fn a_policy_that_does_not_parse_stops_the_start_with_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("bad-policy.yaml");
    std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n")
        .unwrap();
    let out = std::process::Command::new(e2e::workspace_binary("apiserver-lite").unwrap())
        .arg("--audit-policy-file")
        .arg(&policy)
        .arg("--audit-log-path")
        .arg(dir.path().join("audit.log"))
        .args(["--secure-port", "0", "--bind-address", "127.0.0.1"])
        .arg("--cert-dir")
        .arg(dir.path().join("pki"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad-policy.yaml") && err.contains("line 4"), "{err}");
    assert!(err.contains("unknown variant `Loud`"), "{err}");
    assert!(!dir.path().join("audit.log").exists(), "nothing started");
}
