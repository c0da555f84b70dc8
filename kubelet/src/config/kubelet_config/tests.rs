use super::*;

const UPSTREAM_STYLE: &str = r#"
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /srv/manifests
fileCheckFrequency: 5s
syncFrequency: 1m0s
maxPods: 30
readOnlyPort: 10255
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
clusterDNS: ["10.96.0.10"]
someTypoField: true
"#;

#[test]
fn reads_upstream_field_names_and_keeps_going_on_unimplemented_ones() {
    let file = KubeletConfigFile::parse(Path::new("k.yaml"), UPSTREAM_STYLE).unwrap();
    let mut c = KubeletConfig { node_name: "node-a".into(), ..KubeletConfig::default() };
    file.apply(&mut c);
    assert_eq!(c.static_pod_path.as_deref(), Some(Path::new("/srv/manifests")));
    assert_eq!(c.file_check_frequency, Duration::from_secs(5));
    assert_eq!((c.max_pods, c.read_only_port), (30, 10255));
    assert_eq!(c.container_runtime_endpoint, "unix:///run/containerd/containerd.sock");
    let notes = file.notes();
    assert_eq!(notes.accepted_not_implemented, ["clusterDNS"]);
    assert!(c.authentication_token_webhook);
    assert!(!c.anonymous_auth && c.client_ca_file.is_none());
    assert_eq!(notes.unknown, ["someTypoField"]);
    c.validate().unwrap();
}

#[test]
fn bad_files_name_the_file_and_the_problem() {
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let err = KubeletConfigFile::parse(p, "kind: Pod\n").unwrap_err();
    assert!(
        err.to_string().contains("/etc/kubernetes/kubelet.yaml") && err.to_string().contains("Pod")
    );
    let err = KubeletConfigFile::parse(p, "fileCheckFrequency: often\n").unwrap_err();
    assert!(err.to_string().contains("often"), "{err}");
    let err = KubeletConfigFile::parse(p, "maxPods: -3\n").unwrap_err();
    assert!(err.to_string().contains("kubelet.yaml"), "{err}");
    let err = KubeletConfigFile::parse(p, "cgroupDriver: upstart\n").unwrap_err();
    assert!(err.to_string().contains("\"upstart\" is not supported"), "{err}");
}

#[test]
fn cgroup_driver_systemd_is_read_with_a_slice_for_cgroup_root() {
    let p = Path::new("k.yaml");
    let file =
        KubeletConfigFile::parse(p, "cgroupDriver: systemd\ncgroupRoot: kubelet.slice\n").unwrap();
    let mut c = KubeletConfig { node_name: "node-a".into(), ..KubeletConfig::default() };
    file.apply(&mut c);
    assert_eq!((c.cgroup_driver.as_str(), c.cgroup_root.as_str()), ("systemd", "kubelet.slice"));
    c.validate().unwrap();
    let layout = c.node_config().unwrap().layout;
    assert_eq!(layout.kubepods(), "/kubelet.slice/kubelet-kubepods.slice");
    c.cgroup_root = "/kubelet".into();
    let err = c.validate().unwrap_err().to_string();
    assert!(err.starts_with("kubelet config: cgroupRoot: "), "{err}");
}

#[test]
fn eviction_hard_replaces_or_merges_with_the_defaults_and_bad_thresholds_stop_the_start() {
    use crate::eviction::{Signal, ThresholdValue};
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let effective = |text: &str| {
        let mut c = KubeletConfig::default();
        KubeletConfigFile::parse(p, text).unwrap().apply(&mut c);
        c.eviction_hard
    };
    assert_eq!(effective("maxPods: 3\n"), Thresholds::default());
    let kind_style = "evictionHard:\n  nodefs.available: \"0%\"\n  imagefs.available: \"0%\"\n";
    assert_eq!(effective(kind_style), Thresholds::none());
    let merged =
        effective("mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 500Mi\n");
    assert_eq!(merged.get(Signal::MemoryAvailable), Some(ThresholdValue::Quantity(500 << 20)));
    assert_eq!(merged.get(Signal::NodeFsAvailable), Some(ThresholdValue::Fraction(0.1)));
    let file = KubeletConfigFile::parse(p, kind_style).unwrap();
    assert!(file.notes().accepted_not_implemented.is_empty(), "evictionHard is acted on");

    let err = KubeletConfigFile::parse(p, "evictionHard:\n  memory.available: ten percent\n")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "kubelet config /etc/kubernetes/kubelet.yaml: evictionHard[memory.available]: \"ten percent\" is neither a quantity nor a percentage"
    );
    let err = KubeletConfigFile::parse(p, "evictionHard:\n  disk.available: 1Gi\n").unwrap_err();
    assert!(
        err.to_string()
            .ends_with("evictionHard[disk.available]: unsupported eviction signal disk.available"),
        "{err}"
    );
}

#[test]
fn soft_thresholds_grace_periods_minimum_reclaims_and_the_transition_period_are_acted_on() {
    use crate::eviction::config::Threshold;
    use crate::eviction::{Signal, ThresholdValue};
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let text = "evictionHard:\n  memory.available: 100Mi\nevictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  memory.available: 1m30s\nevictionMinimumReclaim:\n  memory.available: 200Mi\nevictionPressureTransitionPeriod: 30s\nevictionMaxPodGracePeriod: 20\n";
    let file = KubeletConfigFile::parse(p, text).unwrap();
    assert_eq!(file.notes(), ConfigNotes::default(), "every field acted on, none unknown");
    let mut c = KubeletConfig { node_name: "node-a".into(), ..KubeletConfig::default() };
    file.apply(&mut c);
    c.validate().unwrap();
    let e = c.eviction().unwrap();
    assert_eq!(e.pressure_transition_period, Duration::from_secs(30));
    assert_eq!(e.max_pod_grace_period_seconds, 20);
    assert_eq!(
        e.thresholds[1],
        Threshold {
            signal: Signal::MemoryAvailable,
            value: ThresholdValue::Quantity(1 << 30),
            grace: Duration::from_secs(90),
            min_reclaim: Some(ThresholdValue::Quantity(200 << 20)),
        }
    );
    // 0s is upstream's default, 5m.
    let zero = KubeletConfigFile::parse(p, "evictionPressureTransitionPeriod: 0s\n").unwrap();
    let mut c = KubeletConfig::default();
    zero.apply(&mut c);
    assert_eq!(c.eviction_pressure_transition_period, Duration::from_secs(300));
}

#[test]
fn a_soft_threshold_without_its_grace_period_or_a_bad_soft_value_stops_the_start() {
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let file = KubeletConfigFile::parse(p, "evictionSoft:\n  nodefs.available: 15%\n").unwrap();
    let mut c = KubeletConfig { node_name: "node-a".into(), ..KubeletConfig::default() };
    file.apply(&mut c);
    assert_eq!(
        c.validate().unwrap_err().to_string(),
        "kubelet config: evictionSoft[nodefs.available]: grace period must be specified for the soft eviction threshold nodefs.available"
    );
    let err = |text: &str| KubeletConfigFile::parse(p, text).unwrap_err().to_string();
    assert_eq!(
        err("evictionSoft:\n  memory.available: ten percent\n"),
        "kubelet config /etc/kubernetes/kubelet.yaml: evictionSoft[memory.available]: \"ten percent\" is neither a quantity nor a percentage"
    );
    assert_eq!(
        err("evictionSoftGracePeriod:\n  memory.available: -30s\n"),
        "kubelet config /etc/kubernetes/kubelet.yaml: evictionSoftGracePeriod[memory.available]: invalid eviction grace period specified: -30s, must be a positive value"
    );
    assert_eq!(
        err("evictionMinimumReclaim:\n  imagefs.available: -1Gi\n"),
        "kubelet config /etc/kubernetes/kubelet.yaml: evictionMinimumReclaim[imagefs.available]: negative eviction minimum reclaim specified for imagefs.available"
    );
}

#[test]
fn system_and_kube_reserved_are_read_and_bad_entries_stop_the_start() {
    use crate::cm::allocatable::Reservable;
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let text = "systemReserved:\n  cpu: 500m\n  memory: 1Gi\nkubeReserved:\n  cpu: \"1\"\n  pid: \"100\"\n";
    let file = KubeletConfigFile::parse(p, text).unwrap();
    assert!(file.notes().accepted_not_implemented.is_empty(), "both are acted on");
    let mut c = KubeletConfig::default();
    file.apply(&mut c);
    let a = c.node_allocatable();
    assert_eq!(a.reservation(Reservable::Cpu, 4000), 1500);
    assert_eq!(a.allocatable(Reservable::Memory, 4 << 30), (3 << 30) - (100 << 20));
    assert_eq!(a.reservation(Reservable::Pid, 4096), 100);

    let err = KubeletConfigFile::parse(p, "kubeReserved:\n  gpu: \"1\"\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "kubelet config /etc/kubernetes/kubelet.yaml: kubeReserved[gpu]: cannot reserve \"gpu\" resource"
    );
    let err = KubeletConfigFile::parse(p, "systemReserved:\n  memory: lots\n").unwrap_err();
    assert!(err.to_string().contains("systemReserved[memory]: \"lots\" is not a quantity"));
}

#[test]
fn container_log_rotation_is_read_and_bad_settings_stop_the_start() {
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let text = "containerLogMaxSize: 50Mi\ncontainerLogMaxFiles: 3\ncontainerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 30s\n";
    let file = KubeletConfigFile::parse(p, text).unwrap();
    assert!(file.notes().accepted_not_implemented.is_empty(), "all four are acted on");
    let mut c = KubeletConfig { node_name: "n".into(), ..KubeletConfig::default() };
    assert_eq!(c.container_log.max_size, Some(10 << 20), "upstream's default");
    file.apply(&mut c);
    assert_eq!(c.container_log.max_size, Some(50 << 20));
    assert_eq!((c.container_log.max_files, c.container_log.max_workers), (3, 2));
    assert_eq!(c.container_log.monitor_interval, Duration::from_secs(30));
    c.validate().unwrap();

    let off = KubeletConfigFile::parse(p, "containerLogMaxSize: \"-1\"\n").unwrap();
    off.apply(&mut c);
    assert_eq!(c.container_log.max_size, None, "a negative size turns rotation off");

    let err = KubeletConfigFile::parse(p, "containerLogMaxSize: ten\n").unwrap_err();
    assert!(
        err.to_string().starts_with("kubelet config /etc/kubernetes/kubelet.yaml: containerLogMaxSize: failed to parse container log max size \"ten\""),
        "{err}"
    );
    let file = KubeletConfigFile::parse(p, "containerLogMaxFiles: 1\n").unwrap();
    file.apply(&mut c);
    assert_eq!(
        c.validate().unwrap_err().to_string(),
        "kubelet config: containerLogMaxFiles: invalid MaxFiles 1, must be > 1"
    );
}

#[test]
fn image_gc_is_read_and_bad_thresholds_stop_the_start() {
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let text = "imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 70\nimageMinimumGCAge: 5m\nimageMaximumGCAge: 24h\n";
    let file = KubeletConfigFile::parse(p, text).unwrap();
    assert!(file.notes().accepted_not_implemented.is_empty(), "all four are acted on");
    let mut c = KubeletConfig { node_name: "n".into(), ..KubeletConfig::default() };
    file.apply(&mut c);
    assert_eq!((c.image_gc.high_threshold_percent, c.image_gc.low_threshold_percent), (90, 70));
    assert_eq!(c.image_gc.min_age, Duration::from_secs(300));
    assert_eq!(c.image_gc.max_age, Duration::from_secs(24 * 3600));
    c.validate().unwrap();
    let file = KubeletConfigFile::parse(p, "imageGCLowThresholdPercent: 95\n").unwrap();
    file.apply(&mut c);
    assert_eq!(
        c.validate().unwrap_err().to_string(),
        "kubelet config: imageGCLowThresholdPercent: imageGCLowThresholdPercent (--image-gc-low-threshold) 95 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 90"
    );
}

#[test]
fn the_longest_crash_back_off_is_read_and_bounded() {
    let p = Path::new("/etc/kubernetes/kubelet.yaml");
    let file = KubeletConfigFile::parse(p, "crashLoopBackOff:\n  maxContainerRestartPeriod: 20s\n")
        .unwrap();
    assert!(file.notes().unknown.is_empty() && file.notes().accepted_not_implemented.is_empty());
    let mut c = KubeletConfig { node_name: "n".into(), ..KubeletConfig::default() };
    assert_eq!(c.restart_backoff_max, Duration::from_secs(300), "upstream's default");
    file.apply(&mut c);
    assert_eq!(c.restart_backoff_max, Duration::from_secs(20));
    c.validate().unwrap();
    for bad in ["500ms", "6m"] {
        let text = format!("crashLoopBackOff: {{maxContainerRestartPeriod: {bad}}}\n");
        KubeletConfigFile::parse(p, &text).unwrap().apply(&mut c);
        let err = c.validate().unwrap_err().to_string();
        assert!(err.starts_with("kubelet config: crashLoopBackOff.maxContainerRestartPeriod: invalid configuration: CrashLoopBackOff.MaxContainerRestartPeriod (got: "), "{err}");
        assert!(err.ends_with("seconds) must be set between 1s and 300s"), "{err}");
    }
}

#[test]
fn reads_the_kubelet_apis_tls_and_authentication() {
    let text = "streamingConnectionIdleTimeout: 5m\nport: 10350\ntlsCertFile: /pki/k.crt\ntlsPrivateKeyFile: /pki/k.key\nauthentication:\n  x509:\n    clientCAFile: /pki/ca.crt\n  anonymous:\n    enabled: true\nauthorization:\n  mode: AlwaysAllow\n";
    let file = KubeletConfigFile::parse(Path::new("k"), text).unwrap();
    let mut c = KubeletConfig { node_name: "n".into(), ..KubeletConfig::default() };
    file.apply(&mut c);
    assert_eq!(c.port, 10350);
    assert_eq!(c.streaming_connection_idle_timeout, Duration::from_secs(300));
    assert_eq!(c.client_ca_file.as_deref(), Some(Path::new("/pki/ca.crt")));
    assert!(c.anonymous_auth);
    assert_eq!(c.authorization_mode, AuthorizationMode::AlwaysAllow);
    assert!(file.notes().accepted_not_implemented.is_empty());
    c.validate().unwrap();
    c.tls_private_key_file = None;
    let err = c.validate().unwrap_err();
    assert!(err.to_string().contains("tlsCertFile"), "{err}");
}

#[test]
fn an_empty_static_pod_path_disables_the_file_source() {
    let file = KubeletConfigFile::parse(Path::new("k"), "staticPodPath: \"\"\n").unwrap();
    let mut c = KubeletConfig::default();
    file.apply(&mut c);
    assert_eq!(c.static_pod_path, None);
}

#[test]
fn the_static_config_path_defaults_beside_the_manifests_and_may_be_moved_or_disabled() {
    let mut c = KubeletConfig::default();
    assert_eq!(c.static_config_path.as_deref(), Some(Path::new("/etc/kubernetes/static-config")));
    let file = KubeletConfigFile::parse(Path::new("k"), "staticConfigPath: /srv/config\n").unwrap();
    file.apply(&mut c);
    assert_eq!(c.static_config_path.as_deref(), Some(Path::new("/srv/config")));
    assert!(file.notes().unknown.is_empty(), "a field of ours, not a typo");
    let file = KubeletConfigFile::parse(Path::new("k"), "staticConfigPath: \"\"\n").unwrap();
    file.apply(&mut c);
    assert_eq!(c.static_config_path, None);
}

#[test]
fn webhook_authorization_is_the_default_and_needs_an_apiserver() {
    let defaults = KubeletConfig::default();
    assert_eq!(defaults.authorization_mode, AuthorizationMode::Webhook);
    assert_eq!(defaults.authorization_cache_authorized_ttl, Duration::from_secs(300));
    assert_eq!(defaults.authorization_cache_unauthorized_ttl, Duration::from_secs(30));
    assert_eq!(defaults.streaming_connection_idle_timeout, Duration::from_secs(4 * 3600));
    let text = "authorization:\n  mode: Webhook\n  webhook:\n    cacheAuthorizedTTL: 1m\n    cacheUnauthorizedTTL: 5s\nauthentication:\n  webhook:\n    enabled: false\n    cacheTTL: 10s\n  x509:\n    clientCAFile: /pki/ca.crt\n";
    let file = KubeletConfigFile::parse(Path::new("k"), text).unwrap();
    let mut c = KubeletConfig { node_name: "n".into(), ..KubeletConfig::default() };
    file.apply(&mut c);
    assert_eq!(c.authorization_cache_authorized_ttl, Duration::from_secs(60));
    assert_eq!(c.authorization_cache_unauthorized_ttl, Duration::from_secs(5));
    assert!(!c.authentication_token_webhook);
    assert_eq!(c.authentication_token_webhook_cache_ttl, Duration::from_secs(10));
    // Standalone, callers could authenticate, and nobody to ask: refused, saying what to do.
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("authorization.mode") && err.contains("AlwaysAllow"), "{err}");
    c.kubeconfig = Some("/etc/kubernetes/kubelet.conf".into());
    c.validate().unwrap();
    // Standalone with no way to authenticate (every request is 401): nothing to authorize.
    let standalone = KubeletConfig { node_name: "n".into(), ..KubeletConfig::default() };
    standalone.validate().unwrap();
    let err = KubeletConfigFile::parse(Path::new("k.yaml"), "authorization:\n  mode: RBAC\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("k.yaml") && err.contains("RBAC"), "{err}");
    assert_eq!("Webhook".parse(), Ok(AuthorizationMode::Webhook));
    assert!("rbac".parse::<AuthorizationMode>().is_err());
}

#[test]
fn the_manifest_url_its_headers_and_period_are_read_and_checked() {
    let text = "staticPodURL: https://config.example/pods\nstaticPodURLHeader:\n  Authorization: [\"Bearer t\"]\n  X-Flavor: [a, b]\nhttpCheckFrequency: 5s\n";
    let file = KubeletConfigFile::parse(Path::new("k"), text).unwrap();
    assert!(file.notes().accepted_not_implemented.is_empty(), "all three are acted on");
    let mut c = KubeletConfig { node_name: "n".into(), ..KubeletConfig::default() };
    assert_eq!(
        (c.static_pod_url.as_deref(), c.http_check_frequency),
        (None, Duration::from_secs(20))
    );
    file.apply(&mut c);
    assert_eq!(c.static_pod_url.as_deref(), Some("https://config.example/pods"));
    assert_eq!(c.http_check_frequency, Duration::from_secs(5));
    assert_eq!(
        c.static_pod_url_headers(),
        [
            ("Authorization".to_string(), "Bearer t".to_string()),
            ("X-Flavor".to_string(), "a".to_string()),
            ("X-Flavor".to_string(), "b".to_string()),
        ]
    );
    c.validate().unwrap();

    let invalid = |edit: &dyn Fn(&mut KubeletConfig)| {
        let mut bad = c.clone();
        edit(&mut bad);
        bad.validate().unwrap_err().to_string()
    };
    assert_eq!(
        invalid(&|c| c.static_pod_url = Some("ftp://x/pods".into())),
        "kubelet config: staticPodURL: \"ftp://x/pods\": unsupported protocol scheme \"ftp\""
    );
    assert_eq!(
        invalid(&|c| c.http_check_frequency = Duration::ZERO),
        "kubelet config: httpCheckFrequency: must be positive"
    );
    assert_eq!(
        invalid(&|c| {
            c.static_pod_url_header.insert("Bad Name".into(), vec!["v".into()]);
        }),
        "kubelet config: staticPodURLHeader: invalid header field name \"Bad Name\""
    );
    let empty = KubeletConfigFile::parse(Path::new("k"), "staticPodURL: \"\"\n").unwrap();
    empty.apply(&mut c);
    assert_eq!(c.static_pod_url, None, "an empty URL is no URL source");
}
