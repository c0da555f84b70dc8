//! Compiles the programs the images carry, each a static executable with only the standard
//! library, so it runs in an image that has nothing else: `pause/pause.rs` (the pause image)
//! and `grpc-health/main.rs` (the gRPC health server of the grpc-health image).

use std::path::{Path, PathBuf};
use std::process::Command;

fn compile(out: &Path, src: &str, watch: &str, name: &str, version_env: &str) {
    println!("cargo:rerun-if-changed={watch}");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let status = Command::new(rustc)
        .args(["--edition", "2024", "--crate-name", &name.replace('-', "_"), "-C", "opt-level=s"])
        .args(["-C", "panic=abort", "-C", "strip=symbols", "-C", "target-feature=+crt-static"])
        .arg("-o")
        .arg(out.join(name))
        .arg(src)
        .env(version_env, env!("CARGO_PKG_VERSION"))
        .status()
        .unwrap_or_else(|e| panic!("run rustc for {src}: {e}"));
    assert!(status.success(), "compiling {src} failed (static glibc from libc6-dev is needed)");
}

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    compile(&out, "pause/pause.rs", "pause/pause.rs", "pause", "PAUSE_VERSION");
    compile(
        &out,
        "grpc-health/main.rs",
        "grpc-health",
        "grpc-health-server",
        "GRPC_HEALTH_VERSION",
    );
}
