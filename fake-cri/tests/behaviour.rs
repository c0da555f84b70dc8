//! The fake runtime behaves like containerd where a kubelet can tell, over a real socket and
//! through the real client.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fake_cri::{ExecOutcome, FakeCriServer, FakeRuntime, Match, Program, Rpc};
use proto::cri::{self, ContainerEventType as Ev, ContainerState as St};
use proto::{ClientOptions, ConnectError, CriClient};
use tokio_stream::StreamExt;

const IMAGE: &str = "busybox:1.35";

struct Rig {
    dir: tempfile::TempDir,
    server: FakeCriServer,
    client: CriClient,
}

impl Rig {
    async fn new() -> Self {
        Self::with(FakeRuntime::new(), ClientOptions::default()).await
    }

    async fn with(runtime: FakeRuntime, options: ClientOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        runtime.add_image(IMAGE).unwrap();
        let server = FakeCriServer::start_with(runtime, &dir.path().join("cri.sock")).unwrap();
        let client = CriClient::connect(server.endpoint(), options).await.unwrap();
        Self { dir, server, client }
    }

    fn fake(&self) -> &FakeRuntime {
        self.server.runtime()
    }

    fn sandbox_config(&self, name: &str) -> cri::PodSandboxConfig {
        cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: name.into(),
                uid: format!("uid-{name}"),
                namespace: "default".into(),
                attempt: 0,
            }),
            log_directory: self.dir.path().join("pods").join(name).display().to_string(),
            labels: HashMap::from([("app".to_string(), name.to_string())]),
            ..Default::default()
        }
    }

    async fn sandbox(&self, name: &str) -> String {
        let config = Some(self.sandbox_config(name));
        self.client
            .run_pod_sandbox(cri::RunPodSandboxRequest { config, runtime_handler: String::new() })
            .await
            .unwrap()
            .pod_sandbox_id
    }

    async fn create(&self, sandbox: &str, name: &str) -> Result<String, proto::CallError> {
        let config = cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata { name: name.into(), attempt: 0 }),
            image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
            log_path: format!("{name}/0.log"),
            labels: HashMap::from([("container".to_string(), name.to_string())]),
            ..Default::default()
        };
        let req = cri::CreateContainerRequest {
            pod_sandbox_id: sandbox.into(),
            config: Some(config),
            sandbox_config: None,
        };
        self.client.create_container(req).await.map(|r| r.container_id)
    }

    async fn start(&self, id: &str) -> Result<(), proto::CallError> {
        self.client
            .start_container(cri::StartContainerRequest { container_id: id.into() })
            .await
            .map(drop)
    }

    async fn status(&self, id: &str) -> cri::ContainerStatus {
        let req = cri::ContainerStatusRequest { container_id: id.into(), verbose: false };
        self.client.container_status(req).await.unwrap().status.unwrap()
    }

    async fn run(&self, sandbox: &str, name: &str) -> String {
        let id = self.create(sandbox, name).await.unwrap();
        self.start(&id).await.unwrap();
        id
    }

    async fn list(&self, filter: cri::ContainerFilter) -> Vec<String> {
        let req = cri::ListContainersRequest { filter: Some(filter) };
        self.client
            .list_containers(req)
            .await
            .unwrap()
            .containers
            .into_iter()
            .map(|c| c.id)
            .collect()
    }
}

fn state(s: St) -> Option<cri::ContainerStateValue> {
    Some(cri::ContainerStateValue { state: s as i32 })
}

#[tokio::test]
async fn containers_move_created_running_exited_with_codes_and_timestamps() {
    let rig = Rig::new().await;
    let sb = rig.sandbox("web").await;
    let id = rig.create(&sb, "app").await.unwrap();
    let s = rig.status(&id).await;
    assert_eq!((s.state, s.started_at, s.finished_at), (St::ContainerCreated as i32, 0, 0));
    rig.start(&id).await.unwrap();
    let s = rig.status(&id).await;
    assert_eq!(s.state, St::ContainerRunning as i32);
    assert!(s.started_at >= s.created_at);
    assert!(rig.start(&id).await.is_err(), "a running container cannot start again");

    assert!(rig.fake().exit_container(&id, 3));
    let s = rig.status(&id).await;
    assert_eq!((s.state, s.exit_code, s.reason.as_str()), (St::ContainerExited as i32, 3, "Error"));
    assert!(s.finished_at >= s.started_at);
    assert!(!rig.fake().exit_container(&id, 0), "an exited container does not exit again");
}

#[tokio::test]
async fn stop_honours_sigterm_handling_and_the_timeout() {
    let rig = Rig::new().await;
    rig.fake().set_program(Match::ContainerName("stubborn".into()), Program::ignores_sigterm());
    let sb = rig.sandbox("web").await;
    let polite = rig.run(&sb, "polite").await;
    let stubborn = rig.run(&sb, "stubborn").await;

    rig.client.stop_container(&polite, Duration::from_secs(30)).await.unwrap();
    assert_eq!(rig.status(&polite).await.exit_code, 143, "dies of SIGTERM at once");

    let started = Instant::now();
    rig.client.stop_container(&stubborn, Duration::from_secs(1)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "waits out the grace period");
    assert_eq!(rig.status(&stubborn).await.exit_code, 137, "then SIGKILL");

    let missing = rig.client.stop_container("nope", Duration::ZERO).await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
}

#[tokio::test]
async fn programs_print_to_the_cri_log_and_exit_by_themselves() {
    let rig = Rig::new().await;
    rig.fake()
        .set_program(Match::Image(IMAGE.into()), Program::prints_and_exits(&["one", "two"], 0));
    let sb = rig.sandbox("job").await;
    let id = rig.run(&sb, "task").await;
    let s = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let s = rig.status(&id).await;
            if s.state == St::ContainerExited as i32 {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!((s.exit_code, s.reason.as_str()), (0, "Completed"));
    let log = std::fs::read_to_string(&s.log_path).unwrap();
    let texts: Vec<&str> = log.lines().map(|l| l.splitn(4, ' ').nth(3).unwrap()).collect();
    assert_eq!(texts, ["one", "two"]);
    assert!(log.lines().all(|l| l.split(' ').nth(1) == Some("stdout")));
}

#[tokio::test]
async fn a_log_that_cannot_be_opened_is_a_start_error_with_exit_code_128() {
    let rig = Rig::new().await;
    let blocker = rig.dir.path().join("pods");
    std::fs::write(&blocker, "a file where the log directory should be").unwrap();
    let sb = rig.sandbox("web").await;
    let id = rig.create(&sb, "app").await.unwrap();
    assert!(rig.start(&id).await.is_err());
    let s = rig.status(&id).await;
    assert_eq!(
        (s.state, s.exit_code, s.reason.as_str()),
        (St::ContainerExited as i32, 128, "StartError")
    );
    assert!(s.message.contains("log"), "{}", s.message);
}

#[tokio::test]
async fn list_filters_by_id_prefix_state_sandbox_and_labels() {
    let rig = Rig::new().await;
    let a = rig.sandbox("a").await;
    let b = rig.sandbox("b").await;
    let a1 = rig.run(&a, "one").await;
    let a2 = rig.create(&a, "two").await.unwrap();
    let b1 = rig.run(&b, "one").await;

    assert_eq!(
        rig.list(cri::ContainerFilter { id: a1[..12].into(), ..Default::default() }).await,
        [a1.as_str()]
    );
    let mut running = rig
        .list(cri::ContainerFilter { state: state(St::ContainerRunning), ..Default::default() })
        .await;
    running.sort();
    let mut want = vec![a1.clone(), b1.clone()];
    want.sort();
    assert_eq!(running, want);
    assert_eq!(
        rig.list(cri::ContainerFilter { state: state(St::ContainerCreated), ..Default::default() })
            .await,
        [a2.as_str()]
    );
    let in_b = rig
        .list(cri::ContainerFilter { pod_sandbox_id: b[..8].into(), ..Default::default() })
        .await;
    assert_eq!(in_b, [b1.as_str()]);
    let two = HashMap::from([("container".to_string(), "two".to_string())]);
    assert_eq!(
        rig.list(cri::ContainerFilter { label_selector: two, ..Default::default() }).await,
        [a2]
    );
    assert!(
        rig.list(cri::ContainerFilter { id: "zzz".into(), ..Default::default() }).await.is_empty()
    );

    let pods = |label: &str| {
        let f = cri::PodSandboxFilter {
            label_selector: HashMap::from([("app".to_string(), label.to_string())]),
            ..Default::default()
        };
        rig.client.list_pod_sandbox(cri::ListPodSandboxRequest { filter: Some(f) })
    };
    assert_eq!(pods("b").await.unwrap().items.into_iter().map(|p| p.id).collect::<Vec<_>>(), [b]);
}

/// The brief lists (the relist's) send their filter whole however large: a label selector of
/// some 6 KB, beyond the request buffer they start with, still selects.
#[tokio::test]
async fn brief_lists_send_a_filter_larger_than_their_request_buffer() {
    let rig = Rig::new().await;
    let a = rig.sandbox("a").await;
    rig.sandbox("b").await;
    let one = rig.run(&a, "one").await;
    let mut selector: HashMap<String, String> =
        (0..100).map(|i| (format!("absent-{i:03}-{}", "k".repeat(20)), "v".repeat(30))).collect();
    let sandboxes = |selector: HashMap<String, String>| {
        let filter = cri::PodSandboxFilter { label_selector: selector, ..Default::default() };
        rig.client.list_pod_sandbox_brief(cri::ListPodSandboxRequest { filter: Some(filter) })
    };
    assert!(sandboxes(selector.clone()).await.unwrap().is_empty(), "no sandbox has them");
    let only_a = HashMap::from([("app".to_string(), "a".to_string())]);
    let listed = sandboxes(only_a.clone()).await.unwrap();
    assert_eq!(listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), [a.as_str()]);
    assert_eq!(listed[0].metadata.as_ref().map(|m| m.uid.as_str()), Some("uid-a"));

    selector.retain(|_, _| false);
    selector.insert("container".into(), "one".repeat(2000));
    let filter = cri::ContainerFilter { label_selector: selector, ..Default::default() };
    let none =
        rig.client.list_containers_brief(cri::ListContainersRequest { filter: Some(filter) });
    assert!(none.await.unwrap().is_empty());
    let filter = cri::ContainerFilter { pod_sandbox_id: a.clone(), ..Default::default() };
    let listed =
        rig.client.list_containers_brief(cri::ListContainersRequest { filter: Some(filter) });
    assert_eq!(listed.await.unwrap().iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [one]);
}

/// The sandbox's address, as the kubelet reads it for `status.podIP`.
async fn pod_ip(rig: &Rig, sandbox: &str) -> String {
    let status = rig.client.pod_sandbox_status(cri::PodSandboxStatusRequest {
        pod_sandbox_id: sandbox.to_string(),
        verbose: false,
    });
    status.await.unwrap().status.unwrap().network.unwrap().ip
}

#[tokio::test]
async fn sandboxes_get_distinct_addresses_from_the_pod_cidr_released_when_stopped() {
    let runtime = FakeRuntime::new();
    runtime.set_pod_cidr("10.244.7.0/29".parse().unwrap()); // .2 to .6: five pods
    let rig = Rig::with(runtime, ClientOptions::default()).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(rig.sandbox(&format!("p{n}")).await);
    }
    let mut ips = Vec::new();
    for id in &ids {
        ips.push(pod_ip(&rig, id).await);
    }
    assert_eq!(ips, ["10.244.7.2", "10.244.7.3", "10.244.7.4", "10.244.7.5", "10.244.7.6"]);

    // A sixth finds the range full, as host-local reports it; nothing else is disturbed.
    let full = rig.client.run_pod_sandbox(cri::RunPodSandboxRequest {
        config: Some(rig.sandbox_config("p5")),
        runtime_handler: String::new(),
    });
    let err = full.await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert!(
        err.message().ends_with(
            "failed to allocate for range 0: no IP addresses available in range set: 10.244.7.2-10.244.7.6"
        ),
        "{err}"
    );
    assert_eq!(rig.fake().sandboxes().len(), 5, "the failed sandbox is not kept");

    // Stopping a sandbox gives its address back; the next sandbox may take it.
    rig.client
        .stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: ids[1].clone() })
        .await
        .unwrap();
    assert_eq!(pod_ip(&rig, &ids[1]).await, "");
    let again = rig.sandbox("p5").await;
    assert_eq!(pod_ip(&rig, &again).await, "10.244.7.3");
}

#[tokio::test]
async fn removing_a_sandbox_kills_and_removes_its_containers_and_frees_the_name() {
    let rig = Rig::new().await;
    let sb = rig.sandbox("web").await;
    let id = rig.run(&sb, "app").await;
    let status = rig.client.pod_sandbox_status(cri::PodSandboxStatusRequest {
        pod_sandbox_id: sb.clone(),
        verbose: false,
    });
    assert!(!status.await.unwrap().status.unwrap().network.unwrap().ip.is_empty());

    let again = rig.client.run_pod_sandbox(cri::RunPodSandboxRequest {
        config: Some(rig.sandbox_config("web")),
        runtime_handler: String::new(),
    });
    assert!(again.await.is_err(), "the same sandbox name and attempt is reserved");

    rig.client
        .stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sb.clone() })
        .await
        .unwrap();
    assert_eq!(rig.status(&id).await.exit_code, 137);
    let s = rig.client.pod_sandbox_status(cri::PodSandboxStatusRequest {
        pod_sandbox_id: sb.clone(),
        verbose: false,
    });
    let s = s.await.unwrap().status.unwrap();
    assert_eq!(s.state, cri::PodSandboxState::SandboxNotready as i32);
    assert!(s.network.unwrap().ip.is_empty(), "no IP once the network is torn down");
    assert!(rig.create(&sb, "late").await.is_err(), "no new containers in a stopped sandbox");

    rig.client
        .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sb.clone() })
        .await
        .unwrap();
    assert!(rig.fake().containers().is_empty() && rig.fake().sandboxes().is_empty());
    rig.sandbox("web").await; // the name is free again
}

#[tokio::test]
async fn containers_need_their_image_present_and_pulls_can_be_refused() {
    let rig = Rig::new().await;
    let sb = rig.sandbox("web").await;
    let req = |image: &str| cri::CreateContainerRequest {
        pod_sandbox_id: sb.clone(),
        config: Some(cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 0 }),
            image: Some(cri::ImageSpec { image: image.into(), ..Default::default() }),
            ..Default::default()
        }),
        sandbox_config: None,
    };
    let err = rig.client.create_container(req("nginx:1.8")).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");

    let spec = |image: &str| Some(cri::ImageSpec { image: image.into(), ..Default::default() });
    let pulled = rig.client.pull_image(cri::PullImageRequest {
        image: spec("nginx:1.8"),
        auth: None,
        sandbox_config: None,
    });
    let image_ref = pulled.await.unwrap().image_ref;
    let status = rig.client.image_status(cri::ImageStatusRequest {
        image: spec("docker.io/library/nginx:1.8"),
        verbose: false,
    });
    assert_eq!(status.await.unwrap().image.unwrap().id, image_ref);
    rig.client.create_container(req("nginx:1.8")).await.unwrap();

    rig.fake().refuse_pulls_of("private/thing").unwrap();
    let refused = rig.client.pull_image(cri::PullImageRequest {
        image: spec("private/thing:1"),
        auth: None,
        sandbox_config: None,
    });
    assert!(refused.await.unwrap_err().to_string().contains("PullImage"));
    let bad = rig.client.pull_image(cri::PullImageRequest {
        image: spec("Not A Ref"),
        auth: None,
        sandbox_config: None,
    });
    assert_eq!(bad.await.unwrap_err().code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn exec_sync_answers_from_the_handler_only_for_running_containers() {
    let rig = Rig::new().await;
    rig.fake().set_exec_handler(|name, cmd| ExecOutcome {
        stdout: format!("{name}:{}", cmd.join(" ")).into_bytes(),
        stderr: Vec::new(),
        exit_code: i32::from(cmd.first().is_some_and(|c| c == "false")),
    });
    let sb = rig.sandbox("web").await;
    let id = rig.run(&sb, "app").await;
    let exec = |cmd: &[&str]| cri::ExecSyncRequest {
        container_id: id.clone(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        timeout: 1,
    };
    let out = rig.client.exec_sync(exec(&["echo", "hi"])).await.unwrap();
    assert_eq!((out.stdout.as_slice(), out.exit_code), (&b"app:echo hi"[..], 0));
    assert_eq!(rig.client.exec_sync(exec(&["false"])).await.unwrap().exit_code, 1);
    rig.fake().exit_container(&id, 0);
    assert!(rig.client.exec_sync(exec(&["true"])).await.is_err(), "no exec in an exited container");
}

#[tokio::test]
async fn the_event_stream_reports_each_transition_in_order() {
    let rig = Rig::new().await;
    let mut events = rig.client.get_container_events().await.unwrap();
    let sb = rig.sandbox("web").await;
    let id = rig.run(&sb, "app").await;
    rig.client.stop_container(&id, Duration::from_secs(1)).await.unwrap();
    rig.client
        .remove_container(cri::RemoveContainerRequest { container_id: id.clone() })
        .await
        .unwrap();

    let mut seen = Vec::new();
    while seen.len() < 6 {
        let e = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push((e.container_id == id, e.container_event_type));
        assert_eq!(e.pod_sandbox_status.unwrap().id, sb);
    }
    let want = [
        (false, Ev::ContainerCreatedEvent as i32),
        (false, Ev::ContainerStartedEvent as i32),
        (true, Ev::ContainerCreatedEvent as i32),
        (true, Ev::ContainerStartedEvent as i32),
        (true, Ev::ContainerStoppedEvent as i32),
        (true, Ev::ContainerDeletedEvent as i32),
    ];
    assert_eq!(seen, want);
    rig.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn injected_failures_and_delays_reach_the_client_as_typed_errors() {
    let runtime = FakeRuntime::new();
    let options =
        ClientOptions { call_timeout: Duration::from_millis(300), ..ClientOptions::default() };
    let rig = Rig::with(runtime, options).await;
    rig.fake().fail_next(Rpc::ListContainers, tonic::Status::unavailable("runtime restarting"));
    let err =
        rig.client.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert!(
        err.to_string().contains("ListContainers")
            && err.to_string().contains(rig.server.endpoint().to_string().as_str()),
        "{err}"
    );
    rig.client.list_containers(cri::ListContainersRequest { filter: None }).await.unwrap();

    rig.fake().set_delay(Rpc::ListPodSandbox, Some(Duration::from_secs(5)));
    let started = Instant::now();
    let err =
        rig.client.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the deadline holds: {:?}",
        started.elapsed()
    );
    assert_eq!(rig.fake().calls(Rpc::ListContainers), 2);
}

#[tokio::test]
async fn a_runtime_without_cri_version_is_refused_at_connect() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = FakeRuntime::new();
    runtime.fail_next(
        Rpc::Version,
        tonic::Status::unimplemented("unknown service runtime.v1.RuntimeService"),
    );
    let server = FakeCriServer::start_with(runtime, &dir.path().join("cri.sock")).unwrap();
    let err = CriClient::connect(server.endpoint(), ClientOptions::default()).await.unwrap_err();
    assert!(matches!(err, ConnectError::NotCri { .. }), "{err:?}");
    assert!(err.to_string().contains("does not implement runtime.v1.RuntimeService"), "{err}");
}

#[tokio::test]
async fn stats_report_running_containers_with_the_usage_tests_set_and_pods_as_their_sums() {
    let rig = Rig::new().await;
    let a = rig.sandbox("a").await;
    let one = rig.run(&a, "one").await;
    let two = rig.run(&a, "two").await;
    let _created = rig.create(&a, "three").await.unwrap();
    let usage = |cpu, ws| fake_cri::Usage {
        cpu_core_nanos: cpu,
        memory_working_set_bytes: ws,
        memory_usage_bytes: ws * 2,
        ..Default::default()
    };
    assert!(rig.fake().set_usage(&one[..12], usage(1_000, 10)));
    assert!(rig.fake().set_usage(&two, usage(2_000, 20)));
    assert!(!rig.fake().set_usage("nope", usage(1, 1)));

    let listed = rig
        .client
        .list_container_stats(cri::ListContainerStatsRequest { filter: None })
        .await
        .unwrap()
        .stats;
    let mut seen: Vec<(String, u64, Option<u64>)> = listed
        .iter()
        .map(|s| {
            let cpu = s.cpu.as_ref().unwrap();
            (
                s.attributes.as_ref().unwrap().id.clone(),
                cpu.usage_core_nano_seconds.as_ref().unwrap().value,
                cpu.usage_nano_cores.as_ref().map(|v| v.value),
            )
        })
        .collect();
    seen.sort();
    let mut want = vec![(one.clone(), 1_000, None), (two.clone(), 2_000, None)];
    want.sort();
    assert_eq!(seen, want, "running containers only, usageNanoCores left to the kubelet");

    let pods = rig
        .client
        .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest { filter: None })
        .await
        .unwrap()
        .stats;
    assert_eq!(pods.len(), 1);
    let linux = pods[0].linux.as_ref().unwrap();
    assert_eq!(linux.cpu.as_ref().unwrap().usage_core_nano_seconds.as_ref().unwrap().value, 3_000);
    assert_eq!(linux.memory.as_ref().unwrap().working_set_bytes.as_ref().unwrap().value, 30);
    assert_eq!(linux.containers.len(), 2);

    // A fault reaches the client as the runtime's status.
    rig.fake().fail_next(Rpc::ListPodSandboxStats, tonic::Status::unimplemented("old runtime"));
    let err = rig
        .client
        .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest { filter: None })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
}
