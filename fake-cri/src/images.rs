//! The image store: references normalised as containerd does, pulls from an imaginary registry
//! that has every well-formed reference unless a test says otherwise (missing, or behind
//! credentials).

use std::collections::{BTreeMap, HashSet};

use base64::Engine;
use proto::cri;
use sha2::{Digest, Sha256};

/// An image reference in its normalised Docker form, e.g. `docker.io/library/busybox:1.35`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Domain and path: `docker.io/library/busybox`.
    pub name: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference {reference:?}: {reason}")]
pub struct InvalidRef {
    pub reference: String,
    pub reason: &'static str,
}

impl ImageRef {
    /// Parses and normalises: adds `docker.io/` and `library/` and the `latest` tag as Docker does.
    pub fn parse(reference: &str) -> Result<Self, InvalidRef> {
        let bad = |reason| InvalidRef { reference: reference.to_string(), reason };
        if reference.is_empty() {
            return Err(bad("empty"));
        }
        if reference.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("contains whitespace"));
        }
        let (rest, digest) = match reference.split_once('@') {
            Some((r, d)) => {
                let hex = d.strip_prefix("sha256:").ok_or_else(|| bad("digest is not sha256"))?;
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(bad("malformed sha256 digest"));
                }
                (r, Some(d.to_string()))
            }
            None => (reference, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].find(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(t) = tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            if !ok {
                return Err(bad("malformed tag"));
            }
        }
        let (domain, path) = match name.split_once('/') {
            Some((d, p)) if d.contains('.') || d.contains(':') || d == "localhost" => {
                (d, p.to_string())
            }
            Some(_) => ("docker.io", name.to_string()),
            None => ("docker.io", format!("library/{name}")),
        };
        let path_ok = path.split('/').all(|c| {
            !c.is_empty()
                && c.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
        });
        if !path_ok || domain.is_empty() {
            return Err(bad(
                "repository name must be lowercase alphanumerics separated by / . _ -",
            ));
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_string()),
            (None, Some(_)) => None,
            (None, None) => Some("latest".to_string()),
        };
        Ok(Self { name: format!("{domain}/{path}"), tag, digest })
    }

    /// `name:tag`, if tagged.
    pub fn tagged(&self) -> Option<String> {
        self.tag.as_ref().map(|t| format!("{}:{t}", self.name))
    }

    /// `name@digest`, if pinned by digest.
    pub fn digested(&self) -> Option<String> {
        self.digest.as_ref().map(|d| format!("{}@{d}", self.name))
    }
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Default)]
pub(crate) struct ImageStore {
    /// By image id (`sha256:<hex>`).
    images: BTreeMap<String, cri::Image>,
    unpullable: HashSet<String>,
    /// Registries (domains) whose pulls need this username and password.
    protected: BTreeMap<String, (String, String)>,
}

impl ImageStore {
    /// Adds (or re-tags) the image a reference names, as a completed pull would.
    pub(crate) fn insert(&mut self, r: &ImageRef) -> cri::Image {
        let key = r.tagged().or_else(|| r.digested()).unwrap_or_else(|| r.name.clone());
        let id = format!("sha256:{}", sha256_hex(format!("config of {key}").as_bytes()));
        let manifest = format!("sha256:{}", sha256_hex(format!("manifest of {key}").as_bytes()));
        let digest = r.digest.clone().unwrap_or(manifest);
        let image = self.images.entry(id.clone()).or_insert_with(|| cri::Image {
            id: id.clone(),
            size: 1_234_567,
            spec: Some(cri::ImageSpec { image: id.clone(), ..Default::default() }),
            ..Default::default()
        });
        if let Some(t) = r.tagged().filter(|t| !image.repo_tags.contains(t)) {
            image.repo_tags.push(t);
        }
        let repo_digest = format!("{}@{digest}", r.name);
        if !image.repo_digests.contains(&repo_digest) {
            image.repo_digests.push(repo_digest);
        }
        tracing::debug!(image = %key, %id, "image stored");
        image.clone()
    }

    /// Finds an image by id (with or without `sha256:`), tag or digest reference.
    pub(crate) fn find(&self, reference: &str) -> Option<&cri::Image> {
        let as_id = if reference.starts_with("sha256:") {
            reference.to_string()
        } else {
            format!("sha256:{reference}")
        };
        if let Some(i) = self.images.get(&as_id) {
            return Some(i);
        }
        let r = ImageRef::parse(reference).ok()?;
        let (tagged, digested) = (r.tagged(), r.digested());
        self.images.values().find(|i| {
            tagged.as_ref().is_some_and(|t| i.repo_tags.contains(t))
                || digested.as_ref().is_some_and(|d| i.repo_digests.contains(d))
        })
    }

    pub(crate) fn remove(&mut self, reference: &str) {
        if let Some(id) = self.find(reference).map(|i| i.id.clone()) {
            self.images.remove(&id);
        }
    }

    pub(crate) fn list(&self) -> Vec<cri::Image> {
        self.images.values().cloned().collect()
    }

    pub(crate) fn refuse(&mut self, r: &ImageRef) {
        self.unpullable.insert(r.name.clone());
    }

    pub(crate) fn pullable(&self, r: &ImageRef) -> bool {
        !self.unpullable.contains(&r.name)
    }

    pub(crate) fn protect(&mut self, domain: &str, username: &str, password: &str) {
        self.protected.insert(domain.to_string(), (username.to_string(), password.to_string()));
    }

    /// Whether `auth` may pull `r`: any may from an unprotected registry; from a protected one,
    /// its username and password (given as such or as `auth`, base64 of `user:password`).
    pub(crate) fn authorized(&self, r: &ImageRef, auth: Option<&cri::AuthConfig>) -> bool {
        let domain = r.name.split('/').next().unwrap_or_default();
        let Some((user, password)) = self.protected.get(domain) else { return true };
        let Some(auth) = auth else { return false };
        let basic = base64::engine::general_purpose::STANDARD
            .decode(&auth.auth)
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        (&auth.username == user && &auth.password == password)
            || basic.as_deref() == Some(&format!("{user}:{password}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_like_docker() {
        let cases = [
            ("busybox", "docker.io/library/busybox:latest"),
            ("busybox:1.35", "docker.io/library/busybox:1.35"),
            ("foo/bar:1", "docker.io/foo/bar:1"),
            ("localhost/pause:1.0", "localhost/pause:1.0"),
            ("127.0.0.1:5000/busybox:1.35", "127.0.0.1:5000/busybox:1.35"),
            ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
        ];
        for (given, want) in cases {
            assert_eq!(ImageRef::parse(given).unwrap().tagged().unwrap(), want, "{given}");
        }
        let d = format!("busybox@sha256:{}", "a".repeat(64));
        let r = ImageRef::parse(&d).unwrap();
        assert_eq!(r.tag, None);
        assert_eq!(
            r.digested().unwrap(),
            format!("docker.io/library/busybox@sha256:{}", "a".repeat(64))
        );
    }

    #[test]
    fn rejects_malformed_references() {
        for bad in ["", "Busybox", "busybox:", "bus box", "busybox@sha256:xyz", "a//b"] {
            assert!(ImageRef::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn finds_by_tag_digest_and_id_and_removes_all_refs() {
        let mut s = ImageStore::default();
        let img = s.insert(&ImageRef::parse("busybox:1.35").unwrap());
        assert_eq!(s.find("busybox:1.35").unwrap().id, img.id);
        assert_eq!(s.find("docker.io/library/busybox:1.35").unwrap().id, img.id);
        assert_eq!(s.find(&img.id).unwrap().id, img.id);
        assert_eq!(s.find(&img.repo_digests[0]).unwrap().id, img.id);
        assert!(s.find("busybox:1.36").is_none());
        s.remove("busybox:1.35");
        assert!(s.list().is_empty());
    }
}
