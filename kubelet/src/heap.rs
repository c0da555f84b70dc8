//! The process heap (glibc's `malloc`), as a node agent that runs for months wants it: a
//! burst of pod starts must not leave its peak resident once the burst is over.
//!
//! - [`tune`]: at start, before any thread: two arenas rather than eight per CPU, so what one
//!   thread frees another reuses; and blocks of 16 KiB and more (a pod sync's boxed future, a
//!   scrape's body) mapped on their own and unmapped on free rather than left as holes among
//!   small live objects. `GLIBC_TUNABLES` naming a malloc tunable wins over both.
//! - [`trim_periodically`]: what is freed later is handed back to the kernel every 30 s.
//!
//! Measured in BENCHMARKS.md (the kubelet's RSS with 110 pods).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Arenas the kubelet's threads share (glibc's default is eight per CPU).
const ARENA_MAX: i32 = 2;
/// Blocks of this size and more are mapped for themselves.
const MMAP_THRESHOLD: i32 = 16 * 1024;
/// How often freed heap memory is handed back to the kernel.
const TRIM_PERIOD: Duration = Duration::from_secs(30);

/// Sets the allocator's parameters; call before any thread starts (the tokio runtime).
#[allow(unsafe_code)]
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let chosen = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."));
        if !chosen {
            // SAFETY: mallopt only sets the allocator's own parameters; it takes no pointers.
            unsafe {
                libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            }
        }
    }
}

/// glibc keeps memory freed after a burst (many pods started at once) in its arenas; handing
/// it back keeps the idle RSS at what the kubelet actually holds.
#[allow(unsafe_code)]
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists and returns unused pages;
    // it takes no pointers from us and may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Trims the heap every [`TRIM_PERIOD`] until `stop`.
pub async fn trim_periodically(stop: CancellationToken) {
    let mut ticker = tokio::time::interval(TRIM_PERIOD);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticker.tick() => trim(),
        }
    }
}
