//! The config file as written, read ([`KubeletConfigFile::parse`]: refused with its field when
//! a value does not parse) and laid over the defaults ([`KubeletConfigFile::apply`]).

use super::*;

impl KubeletConfigFile {
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let file: Self = serde_yaml_ng::from_str(text)
            .map_err(|source| ConfigError::Parse { path: path.into(), source })?;
        if let Some(kind) = file.kind.as_ref().filter(|k| *k != "KubeletConfiguration") {
            return Err(ConfigError::Kind { path: path.into(), kind: kind.clone() });
        }
        if let Some(driver) =
            file.cgroup_driver.as_ref().filter(|d| crate::cm::CgroupDriver::parse(d).is_none())
        {
            return Err(ConfigError::CgroupDriver { path: path.into(), driver: driver.clone() });
        }
        let eviction = |field| {
            move |(signal, source)| ConfigError::Eviction {
                path: path.into(),
                field,
                signal,
                source,
            }
        };
        file.eviction_hard().map_err(eviction("evictionHard"))?;
        file.eviction_soft().map_err(eviction("evictionSoft"))?;
        file.eviction_soft_grace_period().map_err(eviction("evictionSoftGracePeriod"))?;
        file.eviction_minimum_reclaim().map_err(eviction("evictionMinimumReclaim"))?;
        for (field, map) in
            [("systemReserved", &file.system_reserved), ("kubeReserved", &file.kube_reserved)]
        {
            if let Some(map) = map {
                Reserved::parse(map).map_err(|(key, source)| ConfigError::Reserved {
                    path: path.into(),
                    field,
                    key,
                    source,
                })?;
            }
        }
        if let Some(size) = &file.container_log_max_size {
            LogRotatePolicy::parse_max_size(size)
                .map_err(|source| ConfigError::LogMaxSize { path: path.into(), source })?;
        }
        Ok(file)
    }

    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::parse(path, &text)
    }

    pub fn notes(&self) -> ConfigNotes {
        let mut notes = ConfigNotes::default();
        for key in self.other.keys() {
            if ACCEPTED_NOT_IMPLEMENTED.contains(&key.as_str()) {
                notes.accepted_not_implemented.push(key.clone());
            } else {
                notes.unknown.push(key.clone());
            }
        }
        notes
    }

    /// The hard eviction thresholds the file sets: `None` when it sets none (the defaults
    /// stand), or the signal (as written) whose threshold does not parse.
    fn eviction_hard(&self) -> Result<Option<Thresholds>, (String, ThresholdError)> {
        let merge = self.merge_default_eviction_settings.unwrap_or(false);
        self.eviction_hard.as_ref().map(|hard| Thresholds::parse(hard, merge)).transpose()
    }

    fn eviction_soft(&self) -> Result<Option<Thresholds>, (String, ThresholdError)> {
        self.eviction_soft.as_ref().map(|soft| Thresholds::parse(soft, false)).transpose()
    }

    fn eviction_soft_grace_period(
        &self,
    ) -> Result<Option<BTreeMap<Signal, Duration>>, (String, ThresholdError)> {
        self.eviction_soft_grace_period.as_ref().map(parse_grace_periods).transpose()
    }

    fn eviction_minimum_reclaim(
        &self,
    ) -> Result<Option<BTreeMap<Signal, ThresholdValue>>, (String, ThresholdError)> {
        self.eviction_minimum_reclaim.as_ref().map(parse_minimum_reclaims).transpose()
    }

    /// Lays the file over the defaults.
    pub fn apply(&self, c: &mut KubeletConfig) {
        // `parse` refused a file whose thresholds, grace periods or reclaims do not parse.
        if let Ok(Some(hard)) = self.eviction_hard() {
            c.eviction_hard = hard;
        }
        if let Ok(Some(soft)) = self.eviction_soft() {
            c.eviction_soft.values = soft;
        }
        if let Ok(Some(periods)) = self.eviction_soft_grace_period() {
            c.eviction_soft.grace_periods = periods;
        }
        if let Ok(Some(reclaims)) = self.eviction_minimum_reclaim() {
            c.eviction_minimum_reclaim = reclaims;
        }
        if let Some(d) = self.eviction_pressure_transition_period {
            c.eviction_pressure_transition_period =
                if d.0.is_zero() { DEFAULT_PRESSURE_TRANSITION_PERIOD } else { d.0 };
        }
        if let Some(s) = self.eviction_max_pod_grace_period {
            c.eviction_max_pod_grace_period = s;
        }
        // `parse` refused a file whose reservations do not parse.
        for (map, target) in [
            (&self.system_reserved, &mut c.system_reserved),
            (&self.kube_reserved, &mut c.kube_reserved),
        ] {
            if let Some(Ok(r)) = map.as_ref().map(Reserved::parse) {
                *target = r;
            }
        }
        // `parse` refused a file whose size does not parse.
        if let Some(Ok(size)) =
            self.container_log_max_size.as_deref().map(LogRotatePolicy::parse_max_size)
        {
            c.container_log.max_size = size;
        }
        if let Some(n) = self.container_log_max_files {
            c.container_log.max_files = n;
        }
        if let Some(n) = self.container_log_max_workers {
            c.container_log.max_workers = n;
        }
        if let Some(d) = self.container_log_monitor_interval {
            c.container_log.monitor_interval = d.0;
        }
        if let Some(p) = self.image_gc_high_threshold_percent {
            c.image_gc.high_threshold_percent = p;
        }
        if let Some(p) = self.image_gc_low_threshold_percent {
            c.image_gc.low_threshold_percent = p;
        }
        if let Some(d) = self.image_minimum_gc_age {
            c.image_gc.min_age = d.0;
        }
        if let Some(d) = self.image_maximum_gc_age {
            c.image_gc.max_age = d.0;
        }
        if let Some(d) =
            self.crash_loop_back_off.as_ref().and_then(|b| b.max_container_restart_period)
        {
            c.restart_backoff_max = d.0;
        }
        if let Some(p) = &self.static_pod_path {
            c.static_pod_path = (!p.as_os_str().is_empty()).then(|| p.clone());
        }
        if let Some(p) = &self.static_config_path {
            c.static_config_path = (!p.as_os_str().is_empty()).then(|| p.clone());
        }
        if let Some(url) = &self.static_pod_url {
            c.static_pod_url = (!url.is_empty()).then(|| url.clone());
        }
        if let Some(headers) = &self.static_pod_url_header {
            c.static_pod_url_header = headers.clone();
        }
        macro_rules! take {
            ($($field:ident),*) => { $( if let Some(v) = &self.$field { c.$field = v.clone().into(); } )* };
        }
        take!(container_runtime_endpoint, pod_logs_dir, max_pods, cgroup_root, cgroups_per_qos);
        take!(address, port, read_only_port, healthz_port, healthz_bind_address, cgroup_driver);
        take!(node_lease_duration_seconds);
        macro_rules! take_option {
            ($($field:ident),*) => { $( if let Some(v) = &self.$field { c.$field = Some(v.clone()); } )* };
        }
        take_option!(enforce_node_allocatable, system_reserved_cgroup, kube_reserved_cgroup);
        take_option!(qos_reserved, cpu_cfs_quota, pod_pids_limit);
        if let Some(d) = self.cpu_cfs_quota_period {
            c.cpu_cfs_quota_period = Some(d.0);
        }
        if let Some(d) = self.shutdown_grace_period {
            c.shutdown.grace_period = d.0;
        }
        if let Some(d) = self.shutdown_grace_period_critical_pods {
            c.shutdown.critical_grace_period = d.0;
        }
        if let Some(p) = &self.tls_cert_file {
            c.tls_cert_file = Some(p.clone());
        }
        if let Some(p) = &self.tls_private_key_file {
            c.tls_private_key_file = Some(p.clone());
        }
        if let Some(a) = &self.authentication {
            if let Some(ca) = a.x509.as_ref().and_then(|x| x.client_ca_file.clone()) {
                c.client_ca_file = Some(ca);
            }
            if let Some(enabled) = a.anonymous.as_ref().and_then(|x| x.enabled) {
                c.anonymous_auth = enabled;
            }
            if let Some(w) = &a.webhook {
                if let Some(enabled) = w.enabled {
                    c.authentication_token_webhook = enabled;
                }
                if let Some(ttl) = w.cache_ttl {
                    c.authentication_token_webhook_cache_ttl = ttl.0;
                }
            }
        }
        if let Some(a) = &self.authorization {
            if let Some(mode) = a.mode {
                c.authorization_mode = mode;
            }
            if let Some(w) = &a.webhook {
                if let Some(ttl) = w.cache_authorized_ttl {
                    c.authorization_cache_authorized_ttl = ttl.0;
                }
                if let Some(ttl) = w.cache_unauthorized_ttl {
                    c.authorization_cache_unauthorized_ttl = ttl.0;
                }
            }
        }
        for (field, target) in [
            (self.file_check_frequency, &mut c.file_check_frequency),
            (self.http_check_frequency, &mut c.http_check_frequency),
            (self.sync_frequency, &mut c.sync_frequency),
            (self.runtime_request_timeout, &mut c.runtime_request_timeout),
            (self.node_status_update_frequency, &mut c.node_status_update_frequency),
            (self.node_status_report_frequency, &mut c.node_status_report_frequency),
            (self.streaming_connection_idle_timeout, &mut c.streaming_connection_idle_timeout),
        ] {
            if let Some(d) = field {
                *target = d.0;
            }
        }
    }
}
