//! `kubectl cp`'s file specs (`[[namespace/]pod:]file/path`) and its path handling: remote
//! paths are always slash paths cleaned as Go's `path` package cleans them; tar member names
//! lose their leading `/` and any leading `../` as kubectl strips them.

use crate::errors::CliError;

/// One side of a copy: a local path, or a path in a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    pub pod_namespace: Option<String>,
    /// Empty for a local path.
    pub pod_name: String,
    /// The path, its one trailing slash removed.
    pub file: String,
}

impl FileSpec {
    pub fn is_remote(&self) -> bool {
        !self.pod_name.is_empty()
    }
}

/// Reads `[[namespace/]pod:]file/path` as kubectl's `extractFileSpec` does.
pub fn extract(arg: &str) -> Result<FileSpec, CliError> {
    let bad = || {
        CliError::Usage(
            "filespec must match the canonical format: [[namespace/]pod:]file/path".into(),
        )
    };
    let Some(i) = arg.find(':') else {
        return Ok(FileSpec {
            pod_namespace: None,
            pod_name: String::new(),
            file: strip_trailing_slash(arg).into(),
        });
    };
    if i == 0 {
        return Err(bad());
    }
    let (pod, file) = (&arg[..i], &arg[i + 1..]);
    let file = strip_trailing_slash(&file.replace('\\', "/")).to_string();
    let pieces: Vec<&str> = pod.split('/').collect();
    match pieces.as_slice() {
        [name] => Ok(FileSpec { pod_namespace: None, pod_name: (*name).into(), file }),
        [ns, name] => {
            Ok(FileSpec { pod_namespace: Some((*ns).into()), pod_name: (*name).into(), file })
        }
        _ => Err(bad()),
    }
}

/// One trailing `/` removed (but `/` stays `/`).
pub fn strip_trailing_slash(p: &str) -> &str {
    if p.len() > 1 && p.ends_with('/') { &p[..p.len() - 1] } else { p }
}

/// Go's `path.Clean`: the shortest equivalent slash path.
pub fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Go's `path.Dir`, one trailing slash then removed as kubectl's remote paths do.
pub fn dir(p: &str) -> String {
    let d = match p.rfind('/') {
        Some(i) => clean(&p[..=i]),
        None => ".".into(),
    };
    strip_trailing_slash(&d).into()
}

/// Go's `path.Base`.
pub fn base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let trimmed = p.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".into();
    }
    match trimmed.rfind('/') {
        Some(i) => trimmed[i + 1..].into(),
        None => trimmed.into(),
    }
}

/// Go's `path.Join` of two elements.
pub fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => String::new(),
        (true, false) => clean(b),
        (false, true) => clean(a),
        (false, false) => clean(&format!("{a}/{b}")),
    }
}

/// Leading `../` (and a leftover `.` or `..`, and then a leading `/`) removed, as kubectl's
/// `stripPathShortcuts`.
pub fn strip_path_shortcuts(p: &str) -> String {
    let mut s = p;
    while let Some(rest) = s.strip_prefix("../") {
        s = rest;
    }
    if s == "." || s == ".." {
        s = "";
    }
    s.strip_prefix('/').unwrap_or(s).into()
}

/// The prefix every member of `tar cf - SRC` starts with: SRC without leading slashes, cleaned,
/// without leading shortcuts.
pub fn member_prefix(src: &str) -> String {
    strip_path_shortcuts(&clean(src.trim_start_matches(['/', '\\'])))
}

/// Whether `target` (a cleaned join onto `base`) stays inside `base`.
pub fn is_inside(base: &str, target: &str) -> bool {
    let base = clean(base);
    let target = clean(target);
    if base == target {
        return true;
    }
    if base == "." {
        return !(target == ".." || target.starts_with("../") || target.starts_with('/'));
    }
    let prefix = if base.ends_with('/') { base } else { format!("{base}/") };
    target.starts_with(&prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_pod_and_namespace_before_the_colon() {
        assert_eq!(
            extract("ns/talker:/tmp/x/").unwrap(),
            FileSpec {
                pod_namespace: Some("ns".into()),
                pod_name: "talker".into(),
                file: "/tmp/x".into()
            }
        );
        let local = extract("/tmp/local/").unwrap();
        assert!(!local.is_remote());
        assert_eq!(local.file, "/tmp/local");
        assert_eq!(extract("talker:").unwrap().file, "");
    }

    #[test]
    fn malformed_specs_are_refused_in_kubectls_words() {
        for bad in [":/tmp/x", "a/b/c:/tmp/x"] {
            assert_eq!(
                extract(bad).unwrap_err().to_string(),
                "error: filespec must match the canonical format: [[namespace/]pod:]file/path",
                "{bad}"
            );
        }
    }

    #[test]
    fn paths_clean_as_gos_path_package_cleans_them() {
        assert_eq!(clean("/tmp//a/./b/../c"), "/tmp/a/c");
        assert_eq!(clean("../../x"), "../../x");
        assert_eq!(clean("/../x"), "/x");
        assert_eq!(clean(""), ".");
        assert_eq!(dir("/tmp/x"), "/tmp");
        assert_eq!(dir("x"), ".");
        assert_eq!(dir("/x"), "/");
        assert_eq!(base("/tmp/x"), "x");
        assert_eq!(base("/"), "/");
        assert_eq!(join("/tmp", "x"), "/tmp/x");
        assert_eq!(join("dest", ""), "dest");
    }

    #[test]
    fn member_prefixes_lose_leading_slashes_and_shortcuts() {
        assert_eq!(member_prefix("/tmp/foo"), "tmp/foo");
        assert_eq!(member_prefix("../../etc/passwd"), "etc/passwd");
        assert_eq!(member_prefix("/"), "");
        assert_eq!(member_prefix("."), "");
    }

    #[test]
    fn a_member_escaping_the_destination_is_outside() {
        assert!(is_inside("/tmp/d", "/tmp/d"));
        assert!(is_inside("/tmp/d", "/tmp/d/a/b"));
        assert!(!is_inside("/tmp/d", "/tmp/dx"));
        assert!(!is_inside("/tmp/d", "/tmp/d/../e"));
        assert!(is_inside(".", "a"));
        assert!(!is_inside(".", "../a"));
    }
}
