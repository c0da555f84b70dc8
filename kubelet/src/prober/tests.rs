use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};

use super::worker::ProbeTarget;
use super::*;

fn container(extra: serde_json::Value) -> Container {
    let mut c = serde_json::json!({"name": "web", "image": "x:1",
        "ports": [{"name": "http", "containerPort": 8080}]});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(extra.clone());
    }
    serde_json::from_value(c).unwrap()
}

fn target(probe: serde_json::Value) -> ProbeTarget {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "web", "image": "x:1"}]},
    }))
    .unwrap();
    ProbeTarget {
        pod: Arc::new(pod),
        container: container(serde_json::json!({})),
        kind: ProbeKind::Readiness,
        probe: serde_json::from_value(probe).unwrap(),
    }
}

#[test]
fn ports_resolve_by_number_or_container_port_name() {
    let c = container(serde_json::json!({}));
    assert_eq!(resolve_port(&IntOrString::Int(80), &c), Ok(80));
    assert_eq!(resolve_port(&IntOrString::String("http".into()), &c), Ok(8080));
    assert_eq!(resolve_port(&IntOrString::String("8081".into()), &c), Ok(8081));
    let missing = resolve_port(&IntOrString::String("grpc".into()), &c).unwrap_err();
    assert_eq!(missing.to_string(), "couldn't find port: \"grpc\" in container \"web\"");
    assert!(matches!(
        resolve_port(&IntOrString::Int(70000), &c),
        Err(ResolveError::PortRange { .. })
    ));
}

#[test]
fn handlers_aim_at_the_pod_ip_unless_a_host_is_given() {
    let http = target(serde_json::json!({"httpGet": {"path": "healthz", "port": "http",
        "scheme": "HTTPS", "httpHeaders": [{"name": "X-A", "value": "b"}]}}));
    let Handler::Http(t) = Handler::resolve(&http, Some("10.0.0.7"), "cid").unwrap() else {
        panic!("an http handler")
    };
    assert_eq!(t.url(), "https://10.0.0.7:8080/healthz");
    assert_eq!(t.headers, [("X-A".to_string(), "b".to_string())]);
    assert_eq!(Handler::resolve(&http, None, "cid"), Err(ResolveError::NoPodIp));
    let tcp = target(serde_json::json!({"tcpSocket": {"host": "127.0.0.1", "port": 9}}));
    assert_eq!(
        Handler::resolve(&tcp, None, "cid").unwrap(),
        Handler::Tcp { host: "127.0.0.1".into(), port: 9 }
    );
    let grpc = target(serde_json::json!({"grpc": {"port": 9090, "service": "db"}}));
    assert_eq!(
        Handler::resolve(&grpc, Some("10.0.0.7"), "cid").unwrap(),
        Handler::Grpc { host: "10.0.0.7".into(), port: 9090, service: "db".into() }
    );
    let exec = target(serde_json::json!({"exec": {"command": ["cat", "/ready"]}}));
    assert_eq!(
        Handler::resolve(&exec, None, "cid").unwrap(),
        Handler::Exec { container_id: "cid".into(), command: vec!["cat".into(), "/ready".into()] }
    );
}

/// A prober context on a fake runtime, and a status manager holding pod `u` with container
/// `web` running as `containerd://c1`.
async fn context() -> (Arc<ProberContext>, fake_cri::FakeCriServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_cri::FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
    let cri = CriClient::connect(fake.endpoint(), proto::ClientOptions::default()).await.unwrap();
    let statuses = Arc::new(StatusManager::default());
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "web", "image": "x:1"}]},
    }))
    .unwrap();
    statuses.set_pod(Arc::new(pod));
    set_container(&statuses, "c1", true);
    let ctx = ProberContext {
        cri,
        statuses,
        results: Arc::new(ProbeResults::default()),
        recorder: Recorder::default(),
        started: Instant::now() - Duration::from_secs(3600),
        metrics: Arc::new(crate::metrics::KubeletMetrics::new("n")),
    };
    (Arc::new(ctx), fake, dir)
}

fn set_container(statuses: &StatusManager, id: &str, running: bool) {
    let state = if running {
        serde_json::json!({"running": {"startedAt": "2020-01-01T00:00:00Z"}})
    } else {
        serde_json::json!({"terminated": {"exitCode": 1}})
    };
    let cs: ContainerStatus = serde_json::from_value(serde_json::json!({
        "name": "web", "image": "x:1", "imageID": "", "ready": false, "restartCount": 0,
        "started": running, "containerID": format!("containerd://{id}"), "state": state,
    }))
    .unwrap();
    let status = PodStatus {
        phase: Some("Running".into()),
        pod_ip: Some("127.0.0.1".into()),
        container_statuses: Some(vec![cs]),
        ..Default::default()
    };
    statuses.set_status("u", status, std::time::SystemTime::now());
}

#[tokio::test]
async fn thresholds_decide_when_a_verdict_changes_and_a_new_container_starts_over() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ctx, _fake, _dir) = context().await;
    let mut t = target(serde_json::json!({"tcpSocket": {"port": port},
        "successThreshold": 2, "failureThreshold": 2}));
    t.kind = ProbeKind::Readiness;
    let mut memory = worker::Memory::default();
    let verdict = || ctx.results.get(ProbeKind::Readiness, "c1");
    assert!(worker::probe_once(&t, &ctx, &mut memory).await);
    assert_eq!(verdict(), Some(ProbeResult::Failure), "initial: not ready; one success is not two");
    worker::probe_once(&t, &ctx, &mut memory).await;
    assert_eq!(verdict(), Some(ProbeResult::Success), "two successes");
    drop(listener);
    worker::probe_once(&t, &ctx, &mut memory).await;
    assert_eq!(verdict(), Some(ProbeResult::Success), "one failure is below the threshold");
    worker::probe_once(&t, &ctx, &mut memory).await;
    assert_eq!(verdict(), Some(ProbeResult::Failure));
    set_container(&ctx.statuses, "c2", true);
    worker::probe_once(&t, &ctx, &mut memory).await;
    assert_eq!(ctx.results.get(ProbeKind::Readiness, "c1"), None, "the old container is forgotten");
    assert_eq!(ctx.results.get(ProbeKind::Readiness, "c2"), Some(ProbeResult::Failure));
}

#[tokio::test]
async fn each_probe_is_counted_by_result_and_the_worker_forgets_its_series_when_it_stops() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (ctx, _fake, _dir) = context().await;
    let t = target(serde_json::json!({"tcpSocket": {"port": port}, "failureThreshold": 3}));
    let mut memory = worker::Memory::default();
    worker::probe_once(&t, &ctx, &mut memory).await;
    worker::probe_once(&t, &ctx, &mut memory).await;
    drop(listener);
    worker::probe_once(&t, &ctx, &mut memory).await;
    let text = ctx.metrics.render_probes();
    let series = "prober_probe_total{container=\"web\",namespace=\"default\",pod=\"p\",pod_uid=\"u\",probe_type=\"Readiness\"";
    assert!(text.contains(&format!("{series},result=\"successful\"}} 2\n")), "{text}");
    assert!(text.contains(&format!("{series},result=\"failed\"}} 1\n")), "{text}");
    assert!(text.contains("prober_probe_duration_seconds_count{container=\"web\",namespace=\"default\",pod=\"p\",probe_type=\"Readiness\"} 2\n"), "{text}");
    let stop = CancellationToken::new();
    stop.cancel();
    worker::run(t, ctx.clone(), stop).await;
    assert!(!ctx.metrics.render_probes().contains("prober_probe_total"), "forgotten");
}

#[tokio::test]
async fn a_liveness_failure_holds_the_worker_until_the_container_is_replaced() {
    let (ctx, _fake, _dir) = context().await;
    let mut t = target(serde_json::json!({"tcpSocket": {"host": "127.0.0.1", "port": 1},
        "failureThreshold": 1, "timeoutSeconds": 1}));
    t.kind = ProbeKind::Liveness;
    let mut memory = worker::Memory::default();
    worker::probe_once(&t, &ctx, &mut memory).await;
    assert_eq!(ctx.results.get(ProbeKind::Liveness, "c1"), Some(ProbeResult::Failure));
    assert!(memory.on_hold);
    let events = ctx.recorder.list();
    assert!(
        events.iter().any(|e| e.reason == "Unhealthy"
            && e.message.starts_with("Liveness probe failed: dial tcp 127.0.0.1:1")),
        "{events:?}"
    );
    set_container(&ctx.statuses, "c2", true);
    worker::probe_once(&t, &ctx, &mut memory).await;
    assert!(
        !memory.on_hold || ctx.results.get(ProbeKind::Liveness, "c2") == Some(ProbeResult::Failure)
    );
}

#[tokio::test]
async fn a_stopped_container_of_a_never_restarting_pod_ends_the_worker() {
    let (ctx, _fake, _dir) = context().await;
    let mut t = target(serde_json::json!({"exec": {"command": ["true"]}}));
    let mut pod = (*t.pod).clone();
    pod.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    t.pod = Arc::new(pod);
    set_container(&ctx.statuses, "c1", false);
    let mut memory = worker::Memory::default();
    assert!(!worker::probe_once(&t, &ctx, &mut memory).await);
}

#[tokio::test]
async fn a_port_that_resolves_nowhere_is_reported_and_thrown_away() {
    let (ctx, _fake, _dir) = context().await;
    let t = target(serde_json::json!({"httpGet": {"port": "nope"}}));
    let mut memory = worker::Memory::default();
    assert!(worker::probe_once(&t, &ctx, &mut memory).await);
    assert_eq!(ctx.results.get(ProbeKind::Readiness, "c1"), Some(ProbeResult::Failure), "initial");
    let events = ctx.recorder.list();
    assert!(
        events.iter().any(|e| e.message
            == "Readiness probe errored and resulted in unknown state: couldn't find port: \"nope\" in container \"web\""),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_command_that_hangs_fails_within_the_timeout() {
    let (ctx, fake, _dir) = context().await;
    fake.runtime().set_delay(fake_cri::Rpc::ExecSync, Some(Duration::from_secs(30)));
    let started = std::time::Instant::now();
    let out =
        exec::probe(&ctx.cri, "c1", &["sleep".into(), "60".into()], Duration::from_secs(1)).await;
    assert_eq!(out, Outcome::Failure("command \"sleep 60\" timed out".into()));
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}
