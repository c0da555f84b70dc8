//! CRI `PullImage` from a loopback registry through real containerd.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use anyhow::Context;
use e2e::containerd::{Containerd, ContainerdOptions};
use e2e::registry::Registry;
use e2e::require;
use images::TestImage;
use proto::cri;

#[tokio::test]
async fn pulls_busybox_from_the_loopback_registry_through_cri() -> anyhow::Result<()> {
    let mut tools = require::CONTAINERD_TOOLS.to_vec();
    tools.extend(require::REGISTRY_TOOLS);
    if !require::real_runtime(&tools) {
        return Ok(());
    }
    let registry = Registry::start()?;
    let pushed = registry.push_test_images()?;
    let containerd = Containerd::start(ContainerdOptions {
        registries: vec![registry.addr()],
        ..Default::default()
    })
    .await?;
    let client = containerd.client().await?;

    let reference = registry.reference(TestImage::Busybox);
    let spec = || Some(cri::ImageSpec { image: reference.clone(), ..Default::default() });
    let before =
        client.image_status(cri::ImageStatusRequest { image: spec(), verbose: false }).await?;
    assert!(before.image.is_none(), "{reference} must not be present before the pull");

    let result = client
        .pull_image(cri::PullImageRequest { image: spec(), auth: None, sandbox_config: None })
        .await;
    let pulled = result.with_context(|| format!("containerd log:\n{}", containerd.log_tail(30)))?;
    assert!(pulled.image_ref.starts_with("sha256:"), "image ref {:?}", pulled.image_ref);

    let image = client
        .image_status(cri::ImageStatusRequest { image: spec(), verbose: false })
        .await?
        .image
        .context("image present after the pull")?;
    assert_eq!(image.id, pulled.image_ref);
    assert!(image.repo_tags.contains(&reference), "tags {:?}", image.repo_tags);
    let (_, digest) =
        pushed.iter().find(|(i, _)| *i == TestImage::Busybox).context("busybox pushed")?;
    let by_digest = format!("{}/busybox@{digest}", registry.addr());
    assert!(
        image.repo_digests.contains(&by_digest),
        "digests {:?}, want {by_digest}",
        image.repo_digests
    );

    // A tag the registry does not have is a pull error, not a hang.
    let missing = cri::ImageSpec {
        image: format!("{}/busybox:0.0-missing", registry.addr()),
        ..Default::default()
    };
    let err = client
        .pull_image(cri::PullImageRequest {
            image: Some(missing),
            auth: None,
            sandbox_config: None,
        })
        .await
        .expect_err("pull of a missing tag must fail");
    assert!(err.to_string().contains("PullImage"), "{err}");

    let leaks = containerd.stop().await;
    assert!(leaks.is_clean(), "teardown leaked: {leaks:#?}");
    Ok(())
}
