//! Compiles `pause/pause.rs` into a static executable for the pause image.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let src = "pause/pause.rs";
    println!("cargo:rerun-if-changed={src}");
    let status = Command::new(rustc)
        .args(["--edition", "2024", "--crate-name", "pause", "-C", "opt-level=s"])
        .args(["-C", "panic=abort", "-C", "strip=symbols", "-C", "target-feature=+crt-static"])
        .arg("-o")
        .arg(out.join("pause"))
        .arg(src)
        .env("PAUSE_VERSION", env!("CARGO_PKG_VERSION"))
        .status()
        .expect("run rustc for the pause binary");
    assert!(status.success(), "compiling {src} failed (static glibc from libc6-dev is needed)");
}
