//! Runtime endpoints as the kubelet's `--container-runtime-endpoint` spells them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::EndpointError;

/// A CRI endpoint on a unix socket: `unix:///run/containerd/containerd.sock`.
///
/// A bare absolute path is accepted too (older kubelets did), and is displayed with the scheme.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnixEndpoint {
    path: PathBuf,
}

impl UnixEndpoint {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The socket file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl FromStr for UnixEndpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let given = || s.to_string();
        if s.is_empty() {
            return Err(EndpointError::Empty);
        }
        let path = match s.split_once("://") {
            Some(("unix", rest)) => rest,
            Some((scheme, _)) => {
                return Err(EndpointError::UnsupportedScheme {
                    endpoint: given(),
                    scheme: scheme.to_string(),
                });
            }
            None => s,
        };
        if !path.starts_with('/') {
            return Err(EndpointError::NotAbsolute { endpoint: given() });
        }
        Ok(Self { path: PathBuf::from(path) })
    }
}

impl fmt::Display for UnixEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unix://{}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unix_scheme_and_bare_paths() {
        let e: UnixEndpoint = "unix:///run/containerd/containerd.sock".parse().unwrap();
        assert_eq!(e.path(), Path::new("/run/containerd/containerd.sock"));
        assert_eq!(e.to_string(), "unix:///run/containerd/containerd.sock");
        let bare: UnixEndpoint = "/tmp/x.sock".parse().unwrap();
        assert_eq!(bare.to_string(), "unix:///tmp/x.sock");
    }

    #[test]
    fn rejects_other_schemes_relative_paths_and_empty() {
        assert!(matches!(
            "tcp://127.0.0.1:1234".parse::<UnixEndpoint>(),
            Err(EndpointError::UnsupportedScheme { scheme, .. }) if scheme == "tcp"
        ));
        assert!(matches!(
            "unix://relative.sock".parse::<UnixEndpoint>(),
            Err(EndpointError::NotAbsolute { .. })
        ));
        assert!(matches!("".parse::<UnixEndpoint>(), Err(EndpointError::Empty)));
    }
}
