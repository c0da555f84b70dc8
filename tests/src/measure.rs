//! What the benchmarks measure, shared by the bench binaries: percentiles and their summary
//! line, a process's RSS and CPU seconds, and the container runtime's CPU seconds.

use std::time::Duration;

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

fn clock_ticks() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64
}

/// The fields of `/proc/<pid>/stat` after the command name.
fn stat_fields(pid: impl std::fmt::Display) -> std::io::Result<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    Ok(stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().map(String::from).collect())
}

/// CPU seconds used by the runtime under `dir` (containerd and its shims, with the runc, CNI and
/// other children they have reaped).
pub fn runtime_cpu(dir: &std::path::Path) -> f64 {
    crate::leaks::processes(dir, "\0none")
        .into_iter()
        .filter_map(|(pid, _)| stat_fields(pid).ok())
        .map(|f| {
            f.iter().skip(11).take(4).filter_map(|v| v.parse::<f64>().ok()).sum::<f64>()
                / clock_ticks()
        })
        .sum()
}

/// (anonymous, file-backed) resident memory in MiB.
pub fn rss_split(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kb("RssAnon:") / 1024.0, kb("RssFile:") / 1024.0)
}

/// (RSS in MiB, CPU seconds used) of a process.
pub fn usage(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let rss_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let f = stat_fields(pid)?;
    let ticks: f64 = f.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    Ok((rss_kb / 1024.0, ticks / clock_ticks()))
}

/// A process's RSS (MiB) at the end of `window` and its CPU use over it (% of one core).
pub async fn cost_over(pid: u32, window: Duration) -> anyhow::Result<(f64, f64)> {
    let (_, cpu0) = usage(pid)?;
    tokio::time::sleep(window).await;
    let (rss, cpu1) = usage(pid)?;
    Ok((rss, (cpu1 - cpu0) / window.as_secs_f64() * 100.0))
}
