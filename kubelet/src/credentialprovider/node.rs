//! The node's own registry credentials, as upstream's default provider reads them: the first
//! valid `config.json` in the kubelet's root directory, the working directory, `$HOME/.docker`
//! or `/.docker`; else the first valid `.dockercfg`, else `.dockerconfigjson`, in the root
//! directory, the working directory, `$HOME` or `/`. What was read is kept for five minutes
//! (upstream's `CachingDockerConfigProvider`), so an edit takes effect within that.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::config::{ConfigError, DockerConfig, parse_config_json, parse_dockercfg};
use super::keyring::Keyring;

/// Upstream's cache lifetime for the node's credentials.
pub const LIFETIME: Duration = Duration::from_secs(5 * 60);

/// Where the node's credentials are looked for, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPaths {
    /// Directories holding `config.json`.
    pub config_json: Vec<PathBuf>,
    /// Directories holding `.dockercfg` (or `.dockerconfigjson`).
    pub dockercfg: Vec<PathBuf>,
}

impl SearchPaths {
    /// Upstream's: `root_dir` (the kubelet's `--root-dir`) first.
    pub fn upstream(root_dir: &Path) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        let cwd = PathBuf::new();
        Self {
            config_json: vec![
                root_dir.into(),
                cwd.clone(),
                home.join(".docker"),
                "/.docker".into(),
            ],
            dockercfg: vec![root_dir.into(), cwd, home, "/".into()],
        }
    }

    /// Only `dir` (tests).
    pub fn only(dir: &Path) -> Self {
        Self { config_json: vec![dir.into()], dockercfg: vec![dir.into()] }
    }
}

/// The first of `dirs`/`file` that reads and parses.
fn first_valid(
    dirs: &[PathBuf],
    file: &str,
    parse: fn(&[u8]) -> Result<DockerConfig, ConfigError>,
) -> Option<DockerConfig> {
    dirs.iter().map(|d| d.join(file)).find_map(|path| match std::fs::read(&path) {
        Ok(bytes) => match parse(&bytes) {
            Ok(cfg) => {
                tracing::debug!(path = %path.display(), "read the node's registry credentials");
                Some(cfg)
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "skipping registry credentials that do not parse");
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "skipping registry credentials that cannot be read");
            None
        }
    })
}

/// Upstream's `ReadDockerConfigFile`: no valid file is no credentials.
pub fn read(paths: &SearchPaths) -> DockerConfig {
    first_valid(&paths.config_json, "config.json", parse_config_json)
        .or_else(|| first_valid(&paths.dockercfg, ".dockercfg", parse_dockercfg))
        .or_else(|| first_valid(&paths.dockercfg, ".dockerconfigjson", parse_config_json))
        .unwrap_or_default()
}

/// The node's keyring, read again once [`LIFETIME`] has passed.
#[derive(Debug)]
pub struct NodeKeyring {
    paths: SearchPaths,
    lifetime: Duration,
    cache: Mutex<Option<(Instant, Keyring)>>,
}

impl NodeKeyring {
    pub fn new(paths: SearchPaths, lifetime: Duration) -> Self {
        Self { paths, lifetime, cache: Mutex::new(None) }
    }

    /// The keyring as of `now`.
    pub fn keyring(&self, now: Instant) -> Keyring {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        match cache.as_ref() {
            Some((expires, keyring)) if now < *expires => keyring.clone(),
            _ => {
                let keyring = Keyring::from_config(&read(&self.paths));
                *cache = Some((now + self.lifetime, keyring.clone()));
                keyring
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn users(k: &Keyring, repo: &str) -> Vec<String> {
        k.lookup(repo).into_iter().map(|e| e.username).collect()
    }

    #[test]
    fn config_json_comes_first_then_dockercfg_then_dockerconfigjson() {
        let dir = tempfile::tempdir().unwrap();
        let paths = SearchPaths::only(dir.path());
        assert!(read(&paths).is_empty(), "no file, no credentials");
        std::fs::write(
            dir.path().join(".dockerconfigjson"),
            r#"{"auths": {"r.io": {"auth": "YzpwCg=="}}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".dockercfg"),
            r#"{"r.io": {"username": "b", "password": "p"}}"#,
        )
        .unwrap();
        assert_eq!(read(&paths)["r.io"].username, "b");
        std::fs::write(dir.path().join("config.json"), r#"{"auths": {"r.io": {"auth": "YTpw"}}}"#)
            .unwrap();
        assert_eq!(read(&paths)["r.io"].username, "a");
        // A config.json that does not parse is skipped for the next file.
        std::fs::write(dir.path().join("config.json"), "{").unwrap();
        assert_eq!(read(&paths)["r.io"].username, "b");
        std::fs::remove_file(dir.path().join(".dockercfg")).unwrap();
        assert_eq!(read(&paths)["r.io"].username, "c");
    }

    #[test]
    fn the_root_dir_is_searched_first() {
        let paths = SearchPaths::upstream(Path::new("/var/lib/kubelet"));
        assert_eq!(paths.config_json[0], Path::new("/var/lib/kubelet"));
        assert_eq!(paths.config_json[3], Path::new("/.docker"));
        assert_eq!(paths.dockercfg[3], Path::new("/"));
    }

    #[test]
    fn an_edit_is_read_once_the_cache_expires() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.json");
        std::fs::write(&file, r#"{"auths": {"r.io": {"auth": "YTpw"}}}"#).unwrap();
        let node = NodeKeyring::new(SearchPaths::only(dir.path()), LIFETIME);
        let start = Instant::now();
        assert_eq!(users(&node.keyring(start), "r.io/x"), ["a"]);
        std::fs::write(&file, r#"{"auths": {"r.io": {"auth": "Yjpw"}}}"#).unwrap();
        assert_eq!(users(&node.keyring(start + LIFETIME / 2), "r.io/x"), ["a"]);
        assert_eq!(users(&node.keyring(start + LIFETIME), "r.io/x"), ["b"]);
    }
}
