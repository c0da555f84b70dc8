//! Offline test images, built with no network from Debian's `busybox-static` and our own
//! programs, written as OCI archives for `ctr -n k8s.io images import` and `skopeo copy`.
//!
//! | image | reference | runs |
//! | --- | --- | --- |
//! | [`TestImage::Busybox`] | `docker.io/library/busybox:1.35` (`busybox:1.35`) | `sh` |
//! | [`TestImage::BusyboxHttpd`] | `docker.io/library/busybox-httpd:1.35` (`busybox-httpd:1.35`) | `httpd -f -v -p 80 -h /var/www` |
//! | [`TestImage::GrpcHealth`] | `docker.io/library/grpc-health:1.0` (`grpc-health:1.0`) | `/grpc-health-server --port 9090` (entrypoint + cmd) |
//! | [`TestImage::Pause`] | `localhost/pause:1.0` | `/pause` (the sandbox image) |
//!
//! `1.35` is the BusyBox version of Debian 12's `busybox-static`. Every applet is a symlink to
//! `/bin/busybox` at the path BusyBox installs it (`sh`, `sleep`, `httpd`, `wget`, `echo`, …).
//!
//! The grpc-health image is BusyBox plus [`GRPC_HEALTH_BINARY`] at `/grpc-health-server`, for
//! gRPC probes. Its entrypoint is the server and its cmd `--port 9090`, so a pod's `args`
//! replace the flags. `Check` answers from `--service NAME=STATUS`, overridden by the file
//! `/tmp/health/<service>` (`default` for `""`) read on every request; `""` is SERVING unless
//! told otherwise, other services are unknown (NOT_FOUND). `/tmp/health-delay-ms` (or
//! `--delay-ms`) delays every answer. `Watch` and other methods answer UNIMPLEMENTED.
//!
//! - [`oci`]: the OCI image-layout archive writer.
//! - `rootfs`: deterministic layer tar streams.
//! - `grpc_health` (tests only): the modules of the gRPC health server (`grpc-health/`), whose
//!   unit tests run here; the binary itself is built by `build.rs` ([`GRPC_HEALTH_BINARY`]).

pub mod oci;
mod rootfs;

/// The health server's modules, compiled here so their unit tests run with the crate's; the
/// binary's `main.rs` (flags, signals) and the IO loop are exercised by `tests/grpc_health.rs`.
#[cfg(test)]
#[allow(dead_code, clippy::unwrap_used)]
#[path = "../grpc-health"]
mod grpc_health {
    mod config;
    mod connection;
    mod frame;
    mod grpc;
    mod health;
    mod hpack;
    mod huffman;
    mod server;
}

use std::path::{Path, PathBuf};
use std::process::Command;

use oci::{OciImage, RunConfig};
use rootfs::Layer;

/// The static pause executable compiled by `build.rs` from `pause/pause.rs`.
pub const PAUSE_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pause"));

/// The static gRPC health server compiled by `build.rs` from `grpc-health/`: a gRPC server of
/// `grpc.health.v1.Health/Check` over plaintext HTTP/2 (`--help` lists its flags).
pub const GRPC_HEALTH_BINARY: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/grpc-health-server"));

/// The health server's port in the grpc-health image.
pub const GRPC_HEALTH_PORT: u16 = 9090;

/// Where Debian's `busybox-static` installs BusyBox.
pub const DEFAULT_BUSYBOX: &str = "/bin/busybox";

const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("BusyBox not found at {path} (install Debian's busybox-static: hack/install-deps.sh)")]
    BusyboxMissing { path: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} --list-full failed: {detail}")]
    Applets { path: PathBuf, detail: String },
}

/// The images the tests and `hack/local-up.sh` use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestImage {
    Busybox,
    BusyboxHttpd,
    GrpcHealth,
    Pause,
}

impl TestImage {
    pub const ALL: [TestImage; 4] =
        [TestImage::Busybox, TestImage::BusyboxHttpd, TestImage::GrpcHealth, TestImage::Pause];

    /// The full reference containerd stores the image under.
    pub fn reference(self) -> &'static str {
        match self {
            TestImage::Busybox => "docker.io/library/busybox:1.35",
            TestImage::BusyboxHttpd => "docker.io/library/busybox-httpd:1.35",
            TestImage::GrpcHealth => "docker.io/library/grpc-health:1.0",
            TestImage::Pause => "localhost/pause:1.0",
        }
    }

    /// Repository path and tag, as pushed to a registry: `busybox:1.35`.
    pub fn repository_and_tag(self) -> &'static str {
        let r = self.reference();
        let path = r.split_once('/').map_or(r, |(_, rest)| rest);
        path.strip_prefix("library/").unwrap_or(path)
    }

    pub fn file_name(self) -> &'static str {
        match self {
            TestImage::Busybox => "busybox.tar",
            TestImage::BusyboxHttpd => "busybox-httpd.tar",
            TestImage::GrpcHealth => "grpc-health.tar",
            TestImage::Pause => "pause.tar",
        }
    }

    fn tag(self) -> &'static str {
        self.reference().rsplit_once(':').map_or("latest", |(_, t)| t)
    }

    /// Builds the image in memory. `busybox` is the static BusyBox binary to copy in.
    pub fn build(self, busybox: &Path) -> Result<OciImage, ImageError> {
        let (layers, run) = match self {
            TestImage::Pause => (
                vec![pause_layer()?],
                RunConfig { cmd: vec!["/pause".into()], ..RunConfig::default() },
            ),
            TestImage::Busybox => (vec![busybox_layer(busybox)?], shell_run(&["sh"])),
            TestImage::BusyboxHttpd => (
                vec![busybox_layer(busybox)?, www_layer()?],
                shell_run(&["httpd", "-f", "-v", "-p", "80", "-h", "/var/www"]),
            ),
            TestImage::GrpcHealth => (
                vec![busybox_layer(busybox)?, grpc_health_layer()?],
                RunConfig {
                    entrypoint: vec!["/grpc-health-server".into()],
                    cmd: vec!["--port".into(), GRPC_HEALTH_PORT.to_string()],
                    ..shell_run(&[])
                },
            ),
        };
        Ok(OciImage { reference: self.reference().into(), tag: self.tag().into(), layers, run })
    }
}

fn shell_run(cmd: &[&str]) -> RunConfig {
    RunConfig {
        entrypoint: Vec::new(),
        cmd: cmd.iter().map(|s| (*s).to_string()).collect(),
        env: vec![PATH_ENV.into()],
        working_dir: String::new(),
    }
}

fn mem(source: std::io::Error) -> ImageError {
    ImageError::Io { path: PathBuf::from("<layer>"), source }
}

fn pause_layer() -> Result<Vec<u8>, ImageError> {
    let mut l = Layer::new();
    l.file("pause", 0o755, PAUSE_BINARY).map_err(mem)?;
    l.finish().map_err(mem)
}

/// The health server, and the directory its status files go to (writable by any user, as
/// `/tmp`, so a pod with `runAsUser` can flip its status too).
fn grpc_health_layer() -> Result<Vec<u8>, ImageError> {
    let mut l = Layer::new();
    l.dir("tmp", 0o1777).map_err(mem)?;
    l.dir("tmp/health", 0o1777).map_err(mem)?;
    l.file("grpc-health-server", 0o755, GRPC_HEALTH_BINARY).map_err(mem)?;
    l.finish().map_err(mem)
}

fn www_layer() -> Result<Vec<u8>, ImageError> {
    let mut l = Layer::new();
    l.dir("var", 0o755).map_err(mem)?;
    l.dir("var/www", 0o755).map_err(mem)?;
    let page = "<html><body><h1>It works: busybox httpd standing in for nginx</h1></body></html>\n";
    l.file("var/www/index.html", 0o644, page.as_bytes()).map_err(mem)?;
    l.finish().map_err(mem)
}

fn busybox_layer(busybox: &Path) -> Result<Vec<u8>, ImageError> {
    let binary = std::fs::read(busybox).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => ImageError::BusyboxMissing { path: busybox.into() },
        _ => ImageError::Io { path: busybox.into(), source },
    })?;
    let out = Command::new(busybox)
        .arg("--list-full")
        .output()
        .map_err(|source| ImageError::Io { path: busybox.into(), source })?;
    if !out.status.success() {
        let detail = String::from_utf8_lossy(&out.stderr).into_owned();
        return Err(ImageError::Applets { path: busybox.into(), detail });
    }
    let listing = String::from_utf8_lossy(&out.stdout);
    let mut applets: Vec<&str> = listing.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    applets.sort_unstable();
    applets.dedup();

    let mut l = Layer::new();
    for (dir, mode) in [
        ("bin", 0o755),
        ("sbin", 0o755),
        ("usr", 0o755),
        ("usr/bin", 0o755),
        ("usr/sbin", 0o755),
        ("dev", 0o755),
        ("proc", 0o555),
        ("sys", 0o555),
        ("etc", 0o755),
        ("root", 0o700),
        ("tmp", 0o1777),
        ("var", 0o755),
    ] {
        l.dir(dir, mode).map_err(mem)?;
    }
    l.file("bin/busybox", 0o755, &binary).map_err(mem)?;
    l.file(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )
    .map_err(mem)?;
    l.file("etc/group", 0o644, b"root:x:0:\nnobody:x:65534:\n").map_err(mem)?;
    for applet in applets {
        if applet == "bin/busybox" || applet.contains("..") || applet.starts_with('/') {
            continue;
        }
        l.symlink(applet, "/bin/busybox").map_err(mem)?;
    }
    l.finish().map_err(mem)
}

/// Builds every test image and writes `<out_dir>/<file_name>`; returns what was written.
pub fn write_archives(
    out_dir: &Path,
    busybox: &Path,
) -> Result<Vec<(TestImage, PathBuf)>, ImageError> {
    std::fs::create_dir_all(out_dir)
        .map_err(|source| ImageError::Io { path: out_dir.into(), source })?;
    TestImage::ALL
        .iter()
        .map(|&image| {
            let path = out_dir.join(image.file_name());
            image
                .build(busybox)?
                .write_archive(&path)
                .map_err(|source| ImageError::Io { path: path.clone(), source })?;
            Ok((image, path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_binary_is_a_static_elf_executable() {
        assert_static_elf("pause", PAUSE_BINARY);
    }

    #[test]
    fn grpc_health_binary_is_a_static_elf_executable() {
        assert_static_elf("grpc-health-server", GRPC_HEALTH_BINARY);
    }

    fn assert_static_elf(name: &str, b: &[u8]) {
        assert_eq!(&b[..4], b"\x7fELF", "{name}");
        // No PT_INTERP program header: the kernel runs it without a dynamic loader.
        let u16_at = |o: usize| usize::from(u16::from_le_bytes([b[o], b[o + 1]]));
        let phoff = usize::try_from(u64::from_le_bytes(b[0x20..0x28].try_into().unwrap())).unwrap();
        let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
        const PT_INTERP: u32 = 3;
        for i in 0..phnum {
            let o = phoff + i * phentsize;
            let p_type = u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
            assert_ne!(p_type, PT_INTERP, "{name} must not need a dynamic loader");
        }
    }

    #[test]
    fn references_and_registry_paths() {
        assert_eq!(TestImage::Busybox.repository_and_tag(), "busybox:1.35");
        assert_eq!(TestImage::Pause.repository_and_tag(), "pause:1.0");
        assert_eq!(TestImage::Busybox.tag(), "1.35");
    }

    #[test]
    fn archives_are_deterministic_and_hold_an_oci_layout() {
        let dir = tempfile::tempdir().unwrap();
        let busybox = Path::new(DEFAULT_BUSYBOX);
        let a = TestImage::Pause.build(busybox).unwrap();
        let b = TestImage::Pause.build(busybox).unwrap();
        assert_eq!(a.manifest_digest().unwrap(), b.manifest_digest().unwrap());
        let path = dir.path().join("pause.tar");
        a.write_archive(&path).unwrap();
        let mut names: Vec<String> = tar::Archive::new(std::fs::File::open(&path).unwrap())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        names.sort();
        assert!(
            names.contains(&"index.json".to_string()) && names.contains(&"oci-layout".to_string())
        );
        assert_eq!(names.iter().filter(|n| n.starts_with("blobs/")).count(), 3);
    }

    #[test]
    fn grpc_health_image_runs_the_server_on_9090_over_busybox() {
        let busybox = Path::new(DEFAULT_BUSYBOX);
        let image = TestImage::GrpcHealth.build(busybox).unwrap();
        assert_eq!(image.reference, "docker.io/library/grpc-health:1.0");
        assert_eq!(TestImage::GrpcHealth.repository_and_tag(), "grpc-health:1.0");
        assert_eq!(image.run.entrypoint, ["/grpc-health-server"]);
        assert_eq!(image.run.cmd, ["--port", "9090"]);
        // The BusyBox layer is the busybox image's, byte for byte (shared in the content store).
        let plain = TestImage::Busybox.build(busybox).unwrap();
        assert_eq!(image.layers[0], plain.layers[0]);
        let mut entries: Vec<(String, u32)> = tar::Archive::new(&image.layers[1][..])
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.path().unwrap().display().to_string(), e.header().mode().unwrap())
            })
            .collect();
        entries.sort();
        assert_eq!(
            entries,
            [
                ("grpc-health-server".to_string(), 0o755),
                ("tmp/".to_string(), 0o1777),
                ("tmp/health/".to_string(), 0o1777),
            ]
        );
    }

    #[test]
    fn missing_busybox_is_named() {
        let err = TestImage::Busybox.build(Path::new("/nonexistent/busybox")).unwrap_err();
        assert!(matches!(err, ImageError::BusyboxMissing { .. }));
        assert!(err.to_string().contains("/nonexistent/busybox"));
    }
}
