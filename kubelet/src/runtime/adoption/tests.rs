#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use fake_cri::FakeCriServer;
use proto::ClientOptions;

use super::*;
use crate::config::manifest;

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/upstream-kubelet-v1.35")
}

/// The golden manifest `name` as this kubelet reads it on `node-a`, after `edit`.
fn manifest(name: &str, edit: impl Fn(String) -> String) -> Pod {
    let path = golden().join("manifests").join(format!("{name}.yaml"));
    let text = edit(std::fs::read_to_string(&path).unwrap());
    manifest::parse(&path, &text, "node-a").unwrap().pod
}

/// A fake runtime holding the pods upstream's kubelet v1.35 made from the golden manifests.
struct Upstream {
    _dir: tempfile::TempDir,
    _fake: FakeCriServer,
    cri: CriClient,
}

impl Upstream {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        fake.runtime().add_image("docker.io/library/busybox:bars").unwrap();
        fake.runtime().import_crictl(&golden().join("cri"), &|p| p).unwrap();
        let cri = CriClient::connect(fake.endpoint(), ClientOptions::default()).await.unwrap();
        Self { _dir: dir, _fake: fake, cri }
    }

    async fn running(&self) -> Vec<RunningPod> {
        running_pods(&self.cri, "file", PodCgroupPolicy::default()).await.unwrap()
    }
}

fn by_name<'a>(pods: &'a [RunningPod], name: &str) -> &'a RunningPod {
    pods.iter().find(|p| p.name == name).unwrap()
}

#[tokio::test]
async fn upstreams_pods_are_read_back_with_what_they_were_created_with() {
    let up = Upstream::start().await;
    let pods = up.running().await;
    let names: Vec<String> = pods.iter().map(RunningPod::full_name).collect();
    assert_eq!(
        names,
        ["default/hostnet-node-a", "default/simple-node-a", "kube-system/rich-node-a"]
    );
    let rich = by_name(&pods, "rich-node-a");
    assert_eq!(rich.uid, "edddae794c4505e1b9198c068dbd121f");
    assert_eq!(rich.identity, None, "upstream records no identity of ours");
    let app = rich.containers.iter().find(|c| c.name == "app").unwrap();
    assert_eq!(app.image, "docker.io/library/busybox:bars");
    let cfg = app.config.as_ref().unwrap();
    assert_eq!(cfg.envs["GREETING"], "hi $(POD_NAME)");
    assert!(cfg.mounts["/host"], "read-only");
    assert_eq!(cfg.resources, Some((102, 20_000, 128 << 20)));
    assert!(by_name(&pods, "hostnet-node-a").sandbox.host_network);
}

#[tokio::test]
async fn upstreams_pods_match_the_manifests_they_were_made_from() {
    let up = Upstream::start().await;
    let pods = up.running().await;
    for (file, pod) in
        [("simple", "simple-node-a"), ("rich", "rich-node-a"), ("hostnet", "hostnet-node-a")]
    {
        let want = manifest(file, |t| t);
        assert_eq!(by_name(&pods, pod).matches(&want), Ok(()), "{file}");
        assert_ne!(
            want.metadata.uid.as_deref(),
            Some(by_name(&pods, pod).uid.as_str()),
            "our content UID is not upstream's: adoption is what keeps the pod"
        );
    }
}

#[tokio::test]
async fn a_manifest_edited_since_names_what_differs() {
    let up = Upstream::start().await;
    let pods = up.running().await;
    let rich = by_name(&pods, "rich-node-a");
    let app = |field: &'static str| Err(Mismatch::Container { container: "app".into(), field });
    type Edit = Box<dyn Fn(String) -> String>;
    let cases: Vec<(Edit, Result<(), Mismatch>)> = vec![
        (Box::new(|t| t.replacen("busybox:bars", "busybox:other", 2)), app("image")),
        (Box::new(|t| t.replace("args: [\"-v\"]", "args: [\"-vv\"]")), app("args")),
        (Box::new(|t| t.replace("\"8080\", \"-h\"", "\"8081\", \"-h\"")), app("command")),
        (Box::new(|t| t.replace("workingDir: /work", "workingDir: /tmp")), app("workingDir")),
        (Box::new(|t| t.replace("readOnly: true", "readOnly: false")), app("volumeMounts")),
        (Box::new(|t| t.replace("cpu: 200m", "cpu: 300m")), app("resources")),
        (
            Box::new(|t| {
                t.replace(
                    "- {name: GREETING, value: \"hi $(POD_NAME)\"}",
                    "- {name: GREETING, value: hello}",
                )
            }),
            app("env"),
        ),
        (
            Box::new(|t| {
                t.replace(
                    "containerPort: 8080, protocol: TCP",
                    "containerPort: 8080, hostPort: 18080, protocol: TCP",
                )
            }),
            Err(Mismatch::Pod { field: "containers[*].ports" }),
        ),
        (
            Box::new(|t| t.replace("  - name: side\n", "  - name: sidecar\n")),
            Err(Mismatch::UnknownContainer { container: "side".into() }),
        ),
        (
            Box::new(|t| t.replace("spec:\n", "spec:\n  hostNetwork: true\n")),
            Err(Mismatch::Pod { field: "hostNetwork" }),
        ),
        // What an API pod may change in place is no difference.
        (Box::new(|t| t.replace("tier: control-plane", "tier: other")), Ok(())),
        (Box::new(|t| t.replace("memory: 64Mi}", "memory: 65Mi}")), Ok(())),
    ];
    for (i, (edit, want)) in cases.into_iter().enumerate() {
        let pod = manifest("rich", edit);
        assert_eq!(rich.matches(&pod), want, "case {i}");
    }
}

#[tokio::test]
async fn a_pod_sized_under_other_cfs_settings_than_the_nodes_is_not_adopted() {
    let up = Upstream::start().await;
    let pod = manifest("rich", |t| t);
    let resources = Err(Mismatch::Container { container: "app".into(), field: "resources" });
    // Upstream's kubelet made it with a 100 ms period and quotas on: a node with the same
    // settings adopts it, one with a 50 ms period or `cpuCFSQuota: false` would size it
    // otherwise.
    for (cfs, want) in [
        (PodCgroupPolicy::default(), Ok(())),
        (
            PodCgroupPolicy { cpu_period_us: 50_000, ..PodCgroupPolicy::default() },
            resources.clone(),
        ),
        (PodCgroupPolicy { enforce_cpu_limits: false, ..PodCgroupPolicy::default() }, resources),
    ] {
        let pods = running_pods(&up.cri, "file", cfs).await.unwrap();
        assert_eq!(by_name(&pods, "rich-node-a").matches(&pod), want, "{cfs:?}");
    }
}
