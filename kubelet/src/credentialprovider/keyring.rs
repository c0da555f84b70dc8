//! Upstream's `BasicDockerKeyring`: credentials indexed by registry location, looked up by the
//! repository an image is pulled from. A location matches when its port is the image's, its
//! host has as many dot-separated parts, each a glob (`*.example.com`) matching the image's,
//! and its path is a prefix of the image's; more specific locations are tried first (the index
//! is sorted in reverse). Docker Hub's `index.docker.io` serves images of the default registry
//! when nothing else matched.

use std::collections::{BTreeMap, BTreeSet};

use super::config::{DockerConfig, Entry};

/// Docker Hub, as a location (`https://index.docker.io/v1/` in Docker's config).
const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

/// A location split as Go's `url.Parse` splits `https://<location>`: host (with port) and path.
fn split_location(location: &str) -> Option<(&str, &str)> {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let rest = rest.split(['#', '?']).next().unwrap_or_default();
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let bad_char = host.chars().any(|c| c.is_whitespace() || c.is_control());
    let bad_port = host
        .rsplit_once(':')
        .filter(|_| !host.ends_with(']'))
        .is_some_and(|(_, p)| !p.bytes().all(|b| b.is_ascii_digit()));
    (!bad_char && !bad_port && !path.contains(char::is_control)).then_some((host, path))
}

/// Go's `net.SplitHostPort` as `SplitURL` uses it: host parts and port (no port: `""`).
fn host_parts_and_port(host: &str) -> (Vec<&str>, &str) {
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once("]:") {
            Some((h, p)) => (h, p),
            None => (host, ""),
        },
        None => match host.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, p),
            _ => (host, ""),
        },
    };
    (name.split('.').collect(), port)
}

/// Go's `filepath.Match` for one host part: `*`, `?`, `[...]` classes (`^` negates, `a-z`
/// ranges) and `\` escapes. A malformed pattern matches nothing.
fn glob(pattern: &[char], name: &[char]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some(('*', rest)) => (0..=name.len()).any(|i| glob(rest, &name[i..])),
        Some(('?', rest)) => !name.is_empty() && glob(rest, &name[1..]),
        Some(('[', rest)) => {
            let Some((&c, tail)) = name.split_first() else { return false };
            match class(rest, c) {
                Some((matched, after)) => matched && glob(after, tail),
                None => false,
            }
        }
        Some(('\\', rest)) => match rest.split_first() {
            Some((&p, after)) => name.first() == Some(&p) && glob(after, &name[1..]),
            None => false,
        },
        Some((&p, rest)) => name.first() == Some(&p) && glob(rest, &name[1..]),
    }
}

/// A `[...]` class after its `[`: whether `c` is in it, and the pattern after its `]`.
fn class(pattern: &[char], c: char) -> Option<(bool, &[char])> {
    let (negated, mut p) = match pattern.split_first() {
        Some(('^', rest)) => (true, rest),
        _ => (false, pattern),
    };
    let mut matched = false;
    let mut first = true;
    loop {
        let (&lo, rest) = p.split_first()?;
        if lo == ']' && !first {
            return Some((matched != negated, rest));
        }
        first = false;
        let (lo, rest) = if lo == '\\' { (*rest.first()?, &rest[1..]) } else { (lo, rest) };
        let (hi, rest) = match rest {
            ['-', hi, after @ ..] if *hi != ']' => {
                if *hi == '\\' {
                    (*after.first()?, &after[1..])
                } else {
                    (*hi, after)
                }
            }
            _ => (lo, rest),
        };
        matched |= lo <= c && c <= hi;
        p = rest;
    }
}

/// Upstream's `URLsMatch`: whether location `glob_location` covers `target` (both without a
/// scheme).
fn urls_match(glob_location: &str, target: &str) -> bool {
    let (Some((glob_host, glob_path)), Some((target_host, target_path))) =
        (split_location(glob_location), split_location(target))
    else {
        return false;
    };
    let (glob_parts, glob_port) = host_parts_and_port(glob_host);
    let (target_parts, target_port) = host_parts_and_port(target_host);
    glob_port == target_port
        && glob_parts.len() == target_parts.len()
        && target_path.starts_with(glob_path)
        && glob_parts
            .iter()
            .zip(&target_parts)
            .all(|(g, t)| glob(&g.chars().collect::<Vec<_>>(), &t.chars().collect::<Vec<_>>()))
}

/// Upstream's `isDefaultRegistryMatch`: whether `image` is pulled from Docker Hub.
fn is_default_registry(image: &str) -> bool {
    let first = image.split('/').next().unwrap_or_default();
    if first.is_empty() {
        return false;
    }
    !image.contains('/')
        || first == "docker.io"
        || first == DEFAULT_REGISTRY_HOST
        || !first.contains(['.', ':'])
}

/// Credentials by location, as upstream's `BasicDockerKeyring`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    /// Locations, most specific first (reverse-sorted).
    index: Vec<String>,
    creds: BTreeMap<String, Vec<Entry>>,
}

impl Keyring {
    pub fn from_config(cfg: &DockerConfig) -> Self {
        let mut k = Self::default();
        k.add(cfg);
        k
    }

    /// Adds every entry of `cfg`, keyed by host plus a path other than `/` (`/v1/` and `/v2/`
    /// count as the host itself). Entries whose location does not parse are skipped.
    pub fn add(&mut self, cfg: &DockerConfig) {
        for (location, entry) in cfg {
            let Some((host, path)) = split_location(location) else {
                tracing::warn!(
                    location,
                    "skipping a registry credential whose location does not parse"
                );
                continue;
            };
            let path = path
                .strip_prefix("/v2")
                .or_else(|| path.strip_prefix("/v1"))
                .filter(|p| p.starts_with('/'))
                .unwrap_or(path);
            let key = if path.is_empty() || path == "/" {
                host.to_string()
            } else {
                format!("{host}{path}")
            };
            self.creds.entry(key).or_default().push(entry.clone());
        }
        let keys: BTreeSet<&String> = self.creds.keys().collect();
        self.index = keys.into_iter().rev().cloned().collect();
    }

    /// The credentials for `repository` (as [`super::reference::repository`] names it), most
    /// specific location first; Docker Hub's when nothing matched and the image is from there.
    pub fn lookup(&self, repository: &str) -> Vec<Entry> {
        let found: Vec<Entry> = self
            .index
            .iter()
            .filter(|k| urls_match(k, repository))
            .flat_map(|k| self.creds.get(k).into_iter().flatten().cloned())
            .collect();
        if !found.is_empty() {
            return found;
        }
        if is_default_registry(repository) {
            return self.creds.get(DEFAULT_REGISTRY_HOST).cloned().unwrap_or_default();
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn e(u: &str) -> Entry {
        Entry { username: u.into(), password: "p".into() }
    }

    fn keyring(entries: &[(&str, &str)]) -> Keyring {
        Keyring::from_config(&entries.iter().map(|(l, u)| (l.to_string(), e(u))).collect())
    }

    fn users(k: &Keyring, repo: &str) -> Vec<String> {
        k.lookup(repo).into_iter().map(|e| e.username).collect()
    }

    #[test]
    fn hosts_match_with_their_port_and_more_specific_paths_come_first() {
        let k = keyring(&[
            ("127.0.0.1:5000", "host"),
            ("127.0.0.1:5000/team", "team"),
            ("https://127.0.0.1:5000/v2/team/app", "app"),
            ("127.0.0.1", "no-port"),
        ]);
        assert_eq!(users(&k, "127.0.0.1:5000/team/app"), ["app", "team", "host"]);
        assert_eq!(users(&k, "127.0.0.1:5000/other"), ["host"]);
        assert_eq!(users(&k, "127.0.0.1/busybox"), ["no-port"]);
        assert!(users(&k, "127.0.0.1:5001/busybox").is_empty(), "ports must be equal");
        assert!(users(&k, "127.0.0.2:5000/busybox").is_empty());
    }

    #[test]
    fn paths_are_prefixes_of_the_repository() {
        let k = keyring(&[("registry.io/team", "team")]);
        assert_eq!(users(&k, "registry.io/team/app"), ["team"]);
        assert_eq!(users(&k, "registry.io/teamwork"), ["team"], "a string prefix, as upstream");
        assert!(users(&k, "registry.io/other").is_empty());
    }

    #[test]
    fn host_parts_are_globs_of_the_same_count() {
        // (`?` cannot be used: a location is parsed as a URL, where it starts the query.)
        let k = keyring(&[("*.example.com", "star"), ("r*.example.[a-c]om", "class")]);
        assert_eq!(users(&k, "a.example.com/x"), ["star"]);
        assert_eq!(users(&k, "r1.example.bom/x"), ["class"]);
        assert!(users(&k, "a.b.example.com/x").is_empty(), "a star is one part");
        assert!(users(&k, "example.com/x").is_empty());
        assert!(glob(&['r', '?'], &['r', '1']) && !glob(&['?'], &[]));
        assert!(glob(&['[', '^', 'a', ']'], &['b']) && !glob(&['[', '^', 'a', ']'], &['a']));
        assert!(!glob(&['[', 'a'], &['a']), "a malformed class matches nothing");
        assert!(glob(&['\\', '*'], &['*']) && !glob(&['\\', '*'], &['x']));
    }

    #[test]
    fn docker_hub_credentials_serve_default_registry_images() {
        let k = keyring(&[("https://index.docker.io/v1/", "hub"), ("quay.io", "quay")]);
        assert_eq!(users(&k, "docker.io/library/busybox"), ["hub"]);
        assert_eq!(users(&k, "quay.io/coreos/etcd"), ["quay"]);
        assert!(users(&k, "gcr.io/x/y").is_empty());
        assert!(is_default_registry("busybox") && is_default_registry("library/busybox"));
        assert!(!is_default_registry("localhost:5000/busybox") && !is_default_registry("/x"));
    }

    #[test]
    fn locations_that_do_not_parse_are_skipped() {
        let k = keyring(&[("bad host", "x"), ("host:port/x", "y"), ("ok.io", "z")]);
        assert_eq!(users(&k, "ok.io/app"), ["z"]);
        assert_eq!(k.index, ["ok.io"]);
    }
}
