//! Where the cluster is and who we are, as kubectl's loading rules decide: `--kubeconfig`, else
//! every file of `KUBECONFIG` merged (the first to set a key wins; missing files skipped), else
//! `~/.kube/config`; then the context (`--context` or `current-context`), its cluster and user
//! (`--cluster`, `--user`), and the flags that override single fields (`--server`, `--token`,
//! `--certificate-authority`, `--client-certificate`, `--client-key`,
//! `--insecure-skip-tls-verify`, `-n`, `--request-timeout`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};

use crate::errors::{CliError, Result};
use crate::flags::ConfigFlags;

/// What a command connects with.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub kube: kube::Config,
    /// The namespace of namespaced requests: `-n`, else the context's, else `default`.
    pub namespace: String,
    /// `host:port` of the server, as kubectl names it in connection errors.
    pub server: String,
}

/// The kubeconfig files the loading rules read, in order.
pub fn kubeconfig_paths(flags: &ConfigFlags) -> Vec<PathBuf> {
    if let Some(p) = &flags.kubeconfig {
        return vec![p.clone()];
    }
    if let Some(v) = std::env::var_os("KUBECONFIG") {
        let paths: Vec<PathBuf> =
            std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect();
        if !paths.is_empty() {
            return paths;
        }
    }
    home_kubeconfig().into_iter().collect()
}

fn home_kubeconfig() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".kube").join("config"))
}

/// The merged kubeconfig: an explicit `--kubeconfig` must exist, the others may not.
pub fn load_kubeconfig(flags: &ConfigFlags) -> Result<Kubeconfig> {
    let explicit = flags.kubeconfig.is_some();
    let mut merged = Kubeconfig::default();
    for path in kubeconfig_paths(flags) {
        if !path.exists() {
            if explicit {
                return Err(CliError::Config(format!(
                    "stat {}: no such file or directory",
                    path.display()
                )));
            }
            continue;
        }
        let one = Kubeconfig::read_from(&path).map_err(|e| {
            CliError::Config(format!("error loading config file \"{}\": {e}", path.display()))
        })?;
        merged = merged.merge(one).map_err(|e| {
            CliError::Config(format!("error merging config file \"{}\": {e}", path.display()))
        })?;
    }
    Ok(merged)
}

/// The client configuration the flags and kubeconfig give.
pub async fn client_config(flags: &ConfigFlags) -> Result<ClientConfig> {
    let mut kc = load_kubeconfig(flags)?;
    let context_name = flags.context.clone().or_else(|| kc.current_context.clone());
    if let Some(name) = &flags.context
        && !kc.contexts.iter().any(|c| &c.name == name)
    {
        return Err(CliError::Config(format!(
            "context was not found for specified context: {name}"
        )));
    }
    // The context whose cluster and user the overrides change: the selected one, or a
    // synthetic one when the kubeconfig has none (kubectl runs with only `--server`).
    let context_name = context_name.unwrap_or_else(|| "kubectl-lite".to_string());
    let context = match kc.contexts.iter().find(|c| c.name == context_name) {
        Some(c) => c.context.clone().unwrap_or_default(),
        None => {
            let c = Context {
                cluster: "kubectl-lite".into(),
                user: Some("kubectl-lite".into()),
                ..Default::default()
            };
            kc.contexts.push(NamedContext {
                name: context_name.clone(),
                context: Some(c.clone()),
                ..Default::default()
            });
            c
        }
    };
    let cluster_name = flags.cluster.clone().unwrap_or(context.cluster.clone());
    let user_name = flags.user.clone().or(context.user.clone()).unwrap_or_default();
    let cluster = named_cluster(&mut kc, &cluster_name);
    if let Some(s) = &flags.server {
        cluster.server = Some(s.clone());
    }
    // Node mode: the kubelet's API takes the server's place.
    if let Some(k) = &flags.kubelet {
        cluster.server = Some(k.clone());
    }
    if let Some(ca) = &flags.certificate_authority {
        cluster.certificate_authority = Some(ca.display().to_string());
        cluster.certificate_authority_data = None;
    }
    if flags.insecure_skip_tls_verify {
        cluster.insecure_skip_tls_verify = Some(true);
    }
    if cluster.server.is_none() {
        // kubectl's default when nothing names a server.
        cluster.server = Some("http://localhost:8080".into());
    }
    let server = cluster.server.clone().unwrap_or_default();
    let user = named_user(&mut kc, &user_name);
    if let Some(t) = &flags.token {
        user.token = Some(t.clone().into());
        user.token_file = None;
    }
    if let Some(c) = &flags.client_certificate {
        user.client_certificate = Some(c.display().to_string());
        user.client_certificate_data = None;
    }
    if let Some(k) = &flags.client_key {
        user.client_key = Some(k.display().to_string());
        user.client_key_data = None;
    }
    let options = KubeConfigOptions {
        context: Some(context_name),
        cluster: Some(cluster_name),
        user: Some(user_name),
    };
    let mut kube = kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(|e| CliError::Config(e.to_string()))?;
    if let Some(ns) = &flags.namespace {
        kube.default_namespace = ns.clone();
    }
    if let Some(user) = &flags.impersonate {
        kube.auth_info.impersonate = Some(user.clone());
    }
    if !flags.impersonate_groups.is_empty() {
        kube.auth_info.impersonate_groups = Some(flags.impersonate_groups.clone());
    }
    if let Some(t) = flags.request_timeout.filter(|t| !t.is_zero()) {
        kube.read_timeout = Some(t);
        kube.connect_timeout = Some(kube.connect_timeout.map_or(t, |c| c.min(t)));
    }
    let namespace = kube.default_namespace.clone();
    Ok(ClientConfig { kube, namespace, server: host_port(&server) })
}

fn named_cluster<'a>(kc: &'a mut Kubeconfig, name: &str) -> &'a mut Cluster {
    let i = match kc.clusters.iter().position(|c| c.name == name) {
        Some(i) => i,
        None => {
            kc.clusters.push(NamedCluster {
                name: name.into(),
                cluster: None,
                ..Default::default()
            });
            kc.clusters.len() - 1
        }
    };
    kc.clusters[i].cluster.get_or_insert_with(Cluster::default)
}

fn named_user<'a>(kc: &'a mut Kubeconfig, name: &str) -> &'a mut AuthInfo {
    let i = match kc.auth_infos.iter().position(|c| c.name == name) {
        Some(i) => i,
        None => {
            kc.auth_infos.push(NamedAuthInfo {
                name: name.into(),
                auth_info: None,
                ..Default::default()
            });
            kc.auth_infos.len() - 1
        }
    };
    kc.auth_infos[i].auth_info.get_or_insert_with(AuthInfo::default)
}

/// `https://127.0.0.1:6443/` → `127.0.0.1:6443`, as kubectl names a server in its errors.
pub fn host_port(server: &str) -> String {
    let rest = server.split_once("://").map_or(server, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// kubectl's `--request-timeout`: `0` (none), a bare number of seconds, or a duration.
pub fn parse_timeout(s: &str) -> std::result::Result<Duration, String> {
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    crate::duration::parse(s).ok_or_else(|| {
        "Invalid timeout value. Timeout must be a single integer in seconds, or an integer followed by a corresponding time unit (e.g. 1s | 2m | 3h)".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_named_by_host_and_port() {
        assert_eq!(host_port("https://127.0.0.1:6443"), "127.0.0.1:6443");
        assert_eq!(host_port("https://example.com:6443/prefix"), "example.com:6443");
        assert_eq!(host_port("localhost:8080"), "localhost:8080");
    }

    #[test]
    fn a_request_timeout_is_seconds_or_a_duration() {
        assert_eq!(parse_timeout("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_timeout("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_timeout("soon").is_err());
    }
}
