//! A loopback OCI registry (Debian's `docker-registry`) with the offline test images pushed by
//! `skopeo`, so CRI `PullImage` is exercised for real; optionally one that wants basic
//! authentication from an htpasswd file (bcrypt), for image pull credentials.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use images::TestImage;

use crate::containerd::terminate;

#[derive(Debug)]
pub struct Registry {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    child: Option<Child>,
    /// The username and password it wants, if any.
    credentials: Option<(String, String)>,
}

/// bcrypt's lowest cost: the registry checks the password on every request, and a test makes
/// many.
const BCRYPT_COST: u32 = 4;

/// A free loopback address (see [`crate::ports`]; the registry binds it right after).
fn free_port() -> anyhow::Result<SocketAddr> {
    Ok(SocketAddr::from(([127, 0, 0, 1], crate::ports::free_port()?)))
}

/// `GET path` over HTTP/1.0; returns the status code and body.
pub fn http_get(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    s.read_to_string(&mut response)?;
    let code = response.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((code, body))
}

impl Registry {
    /// Starts the registry and waits until `/v2/` answers.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with(None)
    }

    /// Starts a registry that answers only requests with basic authentication as `username`
    /// and `password` (the distribution registry's `auth: htpasswd`, over plain HTTP on
    /// loopback).
    pub fn start_with_htpasswd(username: &str, password: &str) -> anyhow::Result<Self> {
        Self::start_with(Some((username.to_string(), password.to_string())))
    }

    fn start_with(credentials: Option<(String, String)>) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("e2e-registry-").tempdir_in("/tmp")?;
        let addr = free_port()?;
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = &credentials {
            let hash = bcrypt::hash(password, BCRYPT_COST).context("bcrypt the password")?;
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, format!("{user}:{hash}\n"))?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: e2e\n    path: {}\n",
                file.display()
            ));
        }
        std::fs::write(dir.path().join("config.yml"), config)?;
        let log = std::fs::File::create(dir.path().join("registry.log"))?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start docker-registry (hack/install-deps.sh installs it)")?;
        let mut me = Self { dir, addr, child: Some(child), credentials };
        let deadline = Instant::now() + Duration::from_secs(20);
        // Without credentials a protected registry answers 401: it is up all the same.
        let ready = if me.credentials.is_some() { 401 } else { 200 };
        loop {
            if let Ok((code, _)) = http_get(addr, "/v2/", Duration::from_secs(1))
                && code == ready
            {
                return Ok(me);
            }
            if let Some(status) = me.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("docker-registry exited ({status}): {}", me.log());
            }
            if Instant::now() > deadline {
                bail!("docker-registry did not answer on {addr} within 20 s: {}", me.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The reference a CRI client pulls an image by: `127.0.0.1:<port>/busybox:1.35`.
    pub fn reference(&self, image: TestImage) -> String {
        format!("{}/{}", self.addr, image.repository_and_tag())
    }

    /// Builds the test images and pushes them with skopeo; returns each manifest digest.
    pub fn push_test_images(&self) -> anyhow::Result<Vec<(TestImage, String)>> {
        let out = self.dir.path().join("archives");
        let mut pushed = Vec::new();
        for (image, archive) in images::write_archives(&out, Path::new(images::DEFAULT_BUSYBOX))? {
            self.copy(&archive, image.repository_and_tag())?;
            let digest = image.build(Path::new(images::DEFAULT_BUSYBOX))?.manifest_digest()?;
            pushed.push((image, digest));
        }
        Ok(pushed)
    }

    /// Pushes one test image as `repository` (`team/busybox:1.35`); returns the reference to
    /// pull it by.
    pub fn push_test_image_as(&self, image: TestImage, repository: &str) -> anyhow::Result<String> {
        let out = self.dir.path().join("archives");
        let archives = images::write_archives(&out, Path::new(images::DEFAULT_BUSYBOX))?;
        let (_, archive) = archives
            .into_iter()
            .find(|(i, _)| *i == image)
            .with_context(|| format!("no archive of {image:?}"))?;
        self.copy(&archive, repository)?;
        Ok(format!("{}/{repository}", self.addr))
    }

    /// `skopeo copy` of an OCI archive to `repository` here, with the registry's credentials.
    fn copy(&self, archive: &Path, repository: &str) -> anyhow::Result<()> {
        let dest = format!("docker://{}/{repository}", self.addr);
        let mut skopeo = Command::new("skopeo");
        skopeo.args(["--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false"]);
        if let Some((user, password)) = &self.credentials {
            skopeo.arg("--dest-creds").arg(format!("{user}:{password}"));
        }
        let output = skopeo
            .arg(format!("oci-archive:{}", archive.display()))
            .arg(&dest)
            .output()
            .context("run skopeo")?;
        if !output.status.success() {
            bail!("skopeo copy to {dest} failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, Duration::from_secs(5));
        }
    }
}
