//! Preconditions of the real tier. A missing dependency fails the test with a message that says
//! how to fix it; it never passes silently. Developers without root may opt out explicitly.

/// Set to `1` to opt out of tests that need root and a real container runtime.
pub const OPT_OUT_ENV: &str = "E2E_SKIP_REAL_RUNTIME";

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|dir| dir.join(tool).is_file()))
}

/// True when the test may run; panics with the reason when it cannot; false (announced on
/// stderr) only when the developer opted out with `E2E_SKIP_REAL_RUNTIME=1`.
pub fn real_runtime(tools: &[&str]) -> bool {
    if std::env::var(OPT_OUT_ENV).is_ok_and(|v| v == "1") {
        eprintln!("NOT RUN: {OPT_OUT_ENV}=1 opts out of tests that need root and containerd");
        return false;
    }
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root: it starts containerd, mounts filesystems and creates network \
         interfaces. Run `hack/test.sh` as root, or set {OPT_OUT_ENV}=1 to opt out."
    );
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !on_path(t)).collect();
    assert!(
        missing.is_empty(),
        "missing on PATH: {missing:?}. Run `hack/install-deps.sh` (or set {OPT_OUT_ENV}=1 to opt out)."
    );
    true
}

/// Where `tool` is on PATH, or an error that names it and how to install it. For harnesses
/// that need a tool but not root (etcd): the start fails loudly instead of the test passing.
pub fn tool(tool: &str) -> anyhow::Result<std::path::PathBuf> {
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|dir| dir.join(tool)).find(|f| f.is_file()))
        .ok_or_else(|| {
            anyhow::anyhow!("`{tool}` not found on PATH: run `hack/install-deps.sh` (as root)")
        })
}

/// The tools a containerd harness needs.
pub const CONTAINERD_TOOLS: &[&str] =
    &["containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip"];

/// The tools a registry harness needs.
pub const REGISTRY_TOOLS: &[&str] = &["docker-registry", "skopeo"];
