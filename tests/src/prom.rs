//! Prometheus text as the real tier reads it: a component's endpoint fetched with the real
//! `kubectl get --raw`, its sample lines, and `promtool check metrics` (Debian's `prometheus`).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::cluster::JoinedNode;

/// `kubectl get --raw <path>` against the node's apiserver: the body, or what kubectl said.
pub fn raw(node: &JoinedNode, path: &str) -> Result<String, String> {
    let out = node.api.kubectl(&["get", "--raw", path]).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("kubectl get --raw {path}: {}{}", text, String::from_utf8_lossy(&out.stderr)))
    }
}

/// Every sample line of the text format: name, labels as written, value. A line that is not
/// a sample fails the test.
pub fn samples(text: &str) -> Vec<(String, String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, rest) = match l.find('}') {
                Some(i) => (&l[..=i], &l[i + 1..]),
                None => l.split_once(' ').unwrap_or_else(|| panic!("not a sample: {l:?}")),
            };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let value = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no value: {l:?}"));
            (name.to_string(), labels.trim_end_matches('}').to_string(), value)
        })
        .collect()
}

/// `promtool check metrics` on `text`: whether it passed, and what it printed.
pub fn promtool(text: &str) -> (bool, String) {
    let spawned = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return (false, format!("starting promtool: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take()
        && let Err(e) = stdin.write_all(text.as_bytes())
    {
        return (false, format!("writing to promtool: {e}"));
    }
    match child.wait_with_output() {
        Ok(out) => (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ),
        Err(e) => (false, format!("waiting for promtool: {e}")),
    }
}
