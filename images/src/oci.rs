//! Writing an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/…`) as one tar
//! archive, importable with `ctr images import` and pushable with `skopeo copy oci-archive:…`.
//! Everything is deterministic: the same inputs give the same digests.

use std::io::Write;
use std::path::Path;

use serde_json::json;
use sha2::{Digest, Sha256};

/// What the image runs and with which environment (the `config` of the image config).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunConfig {
    /// `Entrypoint`; left out of the config when empty.
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: String,
}

/// One image: its name, its uncompressed layers (tar bytes, bottom first) and run config.
/// Layers are stored gzip-compressed, as registries serve them, so pushing keeps the digests.
#[derive(Debug, Clone)]
pub struct OciImage {
    /// The full name containerd and the CRI know it by, e.g. `docker.io/library/busybox:1.35`.
    pub reference: String,
    /// The tag part, recorded as `org.opencontainers.image.ref.name`.
    pub tag: String,
    pub layers: Vec<Vec<u8>>,
    pub run: RunConfig,
}

fn digest(data: &[u8]) -> String {
    let hex: String = Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn descriptor(media_type: &str, data: &[u8]) -> serde_json::Value {
    json!({ "mediaType": media_type, "digest": digest(data), "size": data.len() })
}

const LAYER_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const CONFIG_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// Gzip with a fixed header (no name, mtime 0) so equal layers compress to equal bytes.
fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut gz =
        flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    gz.write_all(data)?;
    gz.finish()
}

/// The blobs of an image: config, manifest and index documents and the compressed layers.
struct Documents {
    config: Vec<u8>,
    manifest: Vec<u8>,
    index: Vec<u8>,
    layers: Vec<Vec<u8>>,
}

impl OciImage {
    fn documents(&self) -> std::io::Result<Documents> {
        let diff_ids: Vec<String> = self.layers.iter().map(|l| digest(l)).collect();
        let compressed =
            self.layers.iter().map(|l| gzip(l)).collect::<std::io::Result<Vec<_>>>()?;
        let mut config = json!({
            "created": "1970-01-01T00:00:00Z",
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Cmd": self.run.cmd,
                "Env": self.run.env,
                "WorkingDir": self.run.working_dir,
            },
            "rootfs": { "type": "layers", "diff_ids": diff_ids },
            "history": [{ "created": "1970-01-01T00:00:00Z", "created_by": "images crate (offline build)" }],
        });
        if !self.run.entrypoint.is_empty() {
            config["config"]["Entrypoint"] = json!(self.run.entrypoint);
        }
        let config = config.to_string().into_bytes();
        let layers: Vec<_> = compressed.iter().map(|l| descriptor(LAYER_TYPE, l)).collect();
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": descriptor(CONFIG_TYPE, &config),
            "layers": layers,
        })
        .to_string()
        .into_bytes();
        let mut entry = descriptor(MANIFEST_TYPE, &manifest);
        entry["platform"] = json!({ "architecture": "amd64", "os": "linux" });
        entry["annotations"] = json!({
            "io.containerd.image.name": self.reference,
            "org.opencontainers.image.ref.name": self.tag,
        });
        let index = json!({ "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [entry] })
            .to_string()
            .into_bytes();
        Ok(Documents { config, manifest, index, layers: compressed })
    }

    /// The manifest digest (what a registry and containerd report as the repo digest).
    pub fn manifest_digest(&self) -> std::io::Result<String> {
        Ok(digest(&self.documents()?.manifest))
    }

    /// Writes the OCI layout as a tar archive at `path`.
    pub fn write_archive(&self, path: &Path) -> std::io::Result<()> {
        let docs = self.documents()?;
        let mut tar = tar::Builder::new(Vec::new());
        append(&mut tar, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        append(&mut tar, "index.json", &docs.index)?;
        let mut blobs: Vec<&[u8]> = vec![&docs.config, &docs.manifest];
        blobs.extend(docs.layers.iter().map(Vec::as_slice));
        for blob in blobs {
            let name = format!("blobs/sha256/{}", &digest(blob)["sha256:".len()..]);
            append(&mut tar, &name, blob)?;
        }
        let bytes = tar.into_inner()?;
        // Several test processes may write the same archive at once: each renames its own file.
        let tmp = path.with_extension(format!("tar.{}.partial", std::process::id()));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    }
}

fn append(tar: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]) -> std::io::Result<()> {
    let mut h = tar::Header::new_ustar();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, name, data)
}
