//! What the benchmarks measure, shared by the bench binaries: percentiles and their summary
//! line, a process's cost over a window, the container runtime's CPU seconds (all read
//! through [`crate::process::usage`]), and [`flag`], a bench's `--name value` arguments.

use std::time::Duration;

use anyhow::Context;

use crate::process::{self, Usage};

/// The `p`th percentile of sorted values (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Prints `name` with the count, median, p99, min and max of `v` (milliseconds); returns the
/// median.
pub fn summary(name: &str, mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&v, 50.0), percentile(&v, 99.0));
    let (min, max) =
        (v.first().copied().unwrap_or(f64::NAN), v.last().copied().unwrap_or(f64::NAN));
    println!(
        "{name:<52} n={:<3} median {p50:8.1} ms   p99 {p99:8.1} ms   min {min:8.1}   max {max:8.1}",
        v.len()
    );
    p50
}

/// CPU seconds used by the runtime under `dir` (containerd and its shims, with the runc, CNI and
/// other children they have reaped).
pub fn runtime_cpu(dir: &std::path::Path) -> f64 {
    crate::leaks::processes(dir, "\0none")
        .into_iter()
        .filter_map(|(pid, _)| process::usage(pid.unsigned_abs()))
        .map(|u| u.cpu_seconds)
        .sum()
}

/// What process `pid` costs so far ([`process::usage`]), or an error naming it once it is gone.
pub fn usage(pid: u32) -> anyhow::Result<Usage> {
    process::usage(pid).with_context(|| format!("process {pid} is gone"))
}

/// A process's RSS (MiB) at the end of `window` and its CPU use over it (% of one core).
pub async fn cost_over(pid: u32, window: Duration) -> anyhow::Result<(f64, f64)> {
    let before = usage(pid)?;
    tokio::time::sleep(window).await;
    let after = usage(pid)?;
    Ok((after.rss_mib(), (after.cpu_seconds - before.cpu_seconds) / window.as_secs_f64() * 100.0))
}

/// The value after `name` in a bench's command line (`--rounds 3`), or `default` when the flag
/// is absent or its value does not parse.
pub fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
