use super::*;

#[test]
fn durations_read_as_upstreams() {
    let ms = Duration::from_millis;
    assert_eq!(go_duration(Duration::ZERO), "0s");
    assert_eq!(go_duration(Duration::from_micros(900)), "0s");
    assert_eq!(go_duration(ms(523)), "523ms");
    assert_eq!(go_duration(ms(1000)), "1s");
    assert_eq!(go_duration(ms(1500)), "1.5s");
    assert_eq!(go_duration(ms(1234)), "1.234s");
    assert_eq!(go_duration(ms(123_250)), "2m3.25s");
    assert_eq!(go_duration(ms(3_600_000)), "1h0m0s");
}

#[test]
fn references_without_tag_or_digest_mean_latest() {
    assert_eq!(with_default_tag("busybox"), "busybox:latest");
    assert_eq!(with_default_tag("busybox:1.35"), "busybox:1.35");
    assert_eq!(with_default_tag("localhost:5000/busybox"), "localhost:5000/busybox:latest");
    assert_eq!(with_default_tag("r.io/b@sha256:ab"), "r.io/b@sha256:ab");
}

mod credentials {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use base64::Engine;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    use super::*;
    use crate::credentialprovider::node::{LIFETIME, SearchPaths};
    use crate::runtime::pull_secrets::FakeSecrets;

    const REGISTRY: &str = "127.0.0.1:5000";
    const IMAGE: &str = "127.0.0.1:5000/busybox:1.35";

    struct Setup {
        _dir: tempfile::TempDir,
        node_dir: std::path::PathBuf,
        fake: fake_cri::FakeCriServer,
        cri: CriClient,
        secrets: Arc<FakeSecrets>,
        recorder: Recorder,
    }

    async fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let fake = fake_cri::FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        fake.runtime().require_auth(REGISTRY, "alice", "s3cret");
        let cri =
            CriClient::connect(fake.endpoint(), proto::ClientOptions::default()).await.unwrap();
        let node_dir = dir.path().join("root");
        std::fs::create_dir_all(&node_dir).unwrap();
        let secrets = Arc::new(FakeSecrets::default());
        Setup { _dir: dir, node_dir, fake, cri, secrets, recorder: Recorder::default() }
    }

    impl Setup {
        fn manager(&self) -> ImageManager {
            let node = NodeKeyring::new(SearchPaths::only(&self.node_dir), LIFETIME);
            let source: Arc<dyn SecretSource> = self.secrets.clone();
            ImageManager::new(node, Some(source))
        }

        fn add_secret(&self, name: &str, type_: &str, key: &str, value: &str) {
            let mut s = Secret {
                type_: Some(type_.into()),
                data: Some(BTreeMap::from([(key.into(), ByteString(value.as_bytes().to_vec()))])),
                ..Default::default()
            };
            s.metadata.name = Some(name.into());
            s.metadata.namespace = Some("default".into());
            self.secrets.secrets.lock().unwrap().push(s);
        }

        async fn ensure(&self, m: &ImageManager, pod: &Pod) -> Result<String, ImageError> {
            let object = ObjectRef::container(pod, "app");
            m.ensure(&self.cri, &self.recorder, &object, pod, IMAGE, "Always").await
        }

        fn events(&self, reason: &str) -> Vec<String> {
            let events = self.recorder.list();
            events.into_iter().filter(|e| e.reason == reason).map(|e| e.message).collect()
        }
    }

    fn pod(name: &str, secrets: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {
                "containers": [{"name": "app", "image": IMAGE}],
                "imagePullSecrets": secrets.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>(),
            },
        }))
        .unwrap()
    }

    fn auths(user: &str, password: &str) -> String {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!(r#"{{"auths": {{"{REGISTRY}": {{"auth": "{auth}"}}}}}}"#)
    }

    #[tokio::test]
    async fn a_pull_secret_opens_a_protected_registry_and_none_is_err_image_pull() {
        let s = setup().await;
        let m = s.manager();
        let err = s.ensure(&m, &pod("anon", &[])).await.unwrap_err();
        assert_eq!(err.reason(), "ErrImagePull");
        assert!(err.to_string().contains("401 Unauthorized"), "{err}");
        // The next try within the backoff is ImagePullBackOff.
        let again = s.ensure(&m, &pod("anon", &[])).await.unwrap_err();
        assert_eq!(again.reason(), "ImagePullBackOff");

        s.add_secret(
            "regcred",
            api::secret::TYPE_DOCKER_CONFIG_JSON,
            ".dockerconfigjson",
            &auths("alice", "s3cret"),
        );
        s.ensure(&m, &pod("with", &["regcred"])).await.unwrap();
        s.fake.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn the_nodes_config_json_serves_pods_without_pull_secrets() {
        let s = setup().await;
        std::fs::write(s.node_dir.join("config.json"), auths("alice", "s3cret")).unwrap();
        s.ensure(&s.manager(), &pod("p", &[])).await.unwrap();
        s.fake.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn every_matching_credential_is_tried_pull_secrets_first() {
        let s = setup().await;
        std::fs::write(s.node_dir.join("config.json"), auths("alice", "s3cret")).unwrap();
        s.add_secret(
            "stale",
            api::secret::TYPE_DOCKERCFG,
            ".dockercfg",
            &format!(r#"{{"{REGISTRY}": {{"username": "alice", "password": "old"}}}}"#),
        );
        s.ensure(&s.manager(), &pod("p", &["stale"])).await.unwrap();
        assert_eq!(
            s.fake.runtime().calls(fake_cri::Rpc::PullImage),
            2,
            "the secret's, then the node's"
        );
        s.fake.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_missing_pull_secret_is_an_event_and_the_pull_goes_on() {
        let s = setup().await;
        s.add_secret(
            "regcred",
            api::secret::TYPE_DOCKER_CONFIG_JSON,
            ".dockerconfigjson",
            &auths("alice", "s3cret"),
        );
        s.ensure(&s.manager(), &pod("p", &["gone", "regcred"])).await.unwrap();
        assert_eq!(
            s.events("FailedToRetrieveImagePullSecret"),
            [
                "Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed."
            ]
        );
        let on_pod = s
            .recorder
            .list()
            .into_iter()
            .find(|e| e.reason == "FailedToRetrieveImagePullSecret")
            .unwrap();
        assert_eq!((on_pod.object.as_str(), on_pod.field_path), ("pod/default/p", None));
        s.fake.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_pull_secret_that_does_not_parse_fails_only_its_pod_naming_both() {
        let s = setup().await;
        let m = s.manager();
        s.add_secret(
            "broken",
            api::secret::TYPE_DOCKER_CONFIG_JSON,
            ".dockerconfigjson",
            r#"{"auths": {"r": 5}}"#,
        );
        s.add_secret(
            "regcred",
            api::secret::TYPE_DOCKER_CONFIG_JSON,
            ".dockerconfigjson",
            &auths("alice", "s3cret"),
        );
        let err = s.ensure(&m, &pod("bad", &["broken"])).await.unwrap_err();
        assert_eq!(err.reason(), "ErrImagePull");
        let want = "Failed to pull image \"127.0.0.1:5000/busybox:1.35\" for pod \"default/bad\": image pull secret \"default/broken\": data[.dockerconfigjson]: auths[r]: must be an object";
        assert_eq!(err.to_string(), want);
        assert_eq!(s.events("Failed"), [want]);
        assert_eq!(s.fake.runtime().calls(fake_cri::Rpc::PullImage), 0, "nothing was pulled");
        s.ensure(&m, &pod("good", &["regcred"])).await.unwrap();
        s.fake.shutdown().await.unwrap();
    }

    #[test]
    fn several_errors_read_as_upstreams_aggregate() {
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
