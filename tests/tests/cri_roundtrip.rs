//! One CRI round trip (sandbox, busybox container, its log, stop, remove), the same body run
//! against the fake runtime and against real containerd.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use anyhow::Context;
use e2e::containerd::Containerd;
use e2e::cri_suite::{self, BUSYBOX, GREETER, GREETER_STDERR, GREETER_STDOUT, Target};
use e2e::require;
use fake_cri::{FakeCriServer, FakeRuntime, Match, Program, Stream};
use proto::{ClientOptions, CriClient};

#[tokio::test]
async fn roundtrip_against_fake_runtime() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let runtime = FakeRuntime::new();
    runtime.add_image(BUSYBOX)?;
    runtime.set_program(
        Match::ContainerName(GREETER.into()),
        Program {
            output: vec![
                (Stream::Stdout, GREETER_STDOUT.into()),
                (Stream::Stderr, GREETER_STDERR.into()),
            ],
            ..Program::prints_and_exits(&[], 0)
        },
    );
    let server = FakeCriServer::start_with(runtime, &dir.path().join("cri.sock"))?;
    let client = CriClient::connect(server.endpoint(), ClientOptions::default()).await?;
    let log_root = dir.path().join("pods");
    let target = Target { client: &client, cgroup_parent: "/fake".into(), log_root: &log_root };
    cri_suite::print_read_log_and_remove(&target).await?;
    server.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn roundtrip_against_containerd() -> anyhow::Result<()> {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return Ok(());
    }
    let containerd = Containerd::start(Default::default()).await?;
    containerd.import_test_images()?;
    let client = containerd.client().await?;
    let log_root = containerd.dir().join("pods");
    let target =
        Target { client: &client, cgroup_parent: containerd.cgroup_parent(), log_root: &log_root };
    let result = cri_suite::print_read_log_and_remove(&target).await;
    let tail = containerd.log_tail(40);
    let leaks = containerd.stop().await;
    result.with_context(|| format!("containerd log:\n{tail}"))?;
    assert!(leaks.is_clean(), "teardown leaked: {leaks:#?}");
    Ok(())
}
