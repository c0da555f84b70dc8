//! `create configmap` and `create secret generic|tls|docker-registry`: keys and values from
//! `--from-literal key=value`, `--from-file [key=]path` (a file, or each regular file of a
//! directory), `--from-env-file` (`KEY=value` lines), read as kubectl reads them;
//! `--append-hash` names as kubectl hashes them.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::tree::{Node, Obj};
use super::{Common, Kind, emit, enforced_namespace, metadata, one_name};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

pub const CONFIG_MAP: Kind =
    Kind { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true };
pub const SECRET: Kind =
    Kind { group: "", version: "v1", plural: "secrets", kind: "Secret", namespaced: true };

/// Where keys come from (the flags configmap and secret generic share).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Sources {
    /// Key files can be specified using their file path, in which case a default name will be
    /// given to them, or optionally with a name and file path, in which case the given name will
    /// be used. Specifying a directory will iterate each named file in the directory that is a
    /// valid key.
    #[arg(long, value_delimiter = ',')]
    pub from_file: Vec<String>,
    /// Specify a key and literal value to insert (i.e. mykey=somevalue)
    #[arg(long)]
    pub from_literal: Vec<String>,
    /// Specify the path to a file to read lines of key=val pairs.
    #[arg(long, value_delimiter = ',')]
    pub from_env_file: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct ConfigMapArgs {
    /// NAME
    pub name: Vec<String>,
    #[command(flatten)]
    pub sources: Sources,
    /// Append a hash of the configmap to its name.
    #[arg(long)]
    pub append_hash: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Subcommand)]
pub enum Secret {
    /// Create a secret from a local file, directory, or literal value.
    Generic(GenericArgs),
    /// Create a TLS secret.
    Tls(TlsArgs),
    /// Create a secret for use with a Docker registry.
    DockerRegistry(DockerArgs),
}

#[derive(Debug, clap::Args)]
pub struct GenericArgs {
    /// NAME
    pub name: Vec<String>,
    #[command(flatten)]
    pub sources: Sources,
    /// The type of secret to create
    #[arg(long = "type")]
    pub secret_type: Option<String>,
    /// Append a hash of the secret to its name.
    #[arg(long)]
    pub append_hash: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct TlsArgs {
    /// NAME
    pub name: Vec<String>,
    /// Path to PEM encoded public key certificate.
    #[arg(long)]
    pub cert: Option<String>,
    /// Path to private key associated with given certificate.
    #[arg(long)]
    pub key: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct DockerArgs {
    /// NAME
    pub name: Vec<String>,
    /// Server location for Docker registry
    #[arg(long, default_value = "https://index.docker.io/v1/")]
    pub docker_server: String,
    /// Username for Docker registry authentication
    #[arg(long)]
    pub docker_username: Option<String>,
    /// Password for Docker registry authentication
    #[arg(long)]
    pub docker_password: Option<String>,
    /// Email for Docker registry
    #[arg(long)]
    pub docker_email: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

/// kubectl's `ParseLiteralSource`.
pub fn literal(source: &str) -> Result<(String, String)> {
    match source.split_once('=') {
        Some((k, v)) => Ok((k.to_string(), v.to_string())),
        None => {
            Err(CliError::Usage(format!("invalid literal source {source}, expected key=value")))
        }
    }
}

/// kubectl's `ParseFileSource`: `path` (key: the base name) or `key=path`.
pub fn file_source(source: &str) -> Result<(Option<String>, String)> {
    if !source.contains('=') {
        return Ok((None, source.to_string()));
    }
    let parts: Vec<&str> = source.split('=').collect();
    match parts.as_slice() {
        ["", p] => Err(CliError::Usage(format!("key name for file path {p} missing"))),
        [k, ""] => Err(CliError::Usage(format!("file path for key name {k} missing"))),
        [k, p] => Ok((Some(k.to_string()), p.to_string())),
        _ => Err(CliError::Usage("key names or file paths cannot contain '='".into())),
    }
}

/// The reason Go gives for a failed file operation (`no such file or directory`).
fn os_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Whether a key is one a ConfigMap or Secret accepts (`IsConfigMapKey`).
fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && key != "."
        && key != ".."
        && !key.starts_with("..")
}

/// The keys and contents the sources name, in flag order (files, then literals, then env
/// files, as kubectl reads them).
pub fn read_sources(s: &Sources, kind: &str, name: &str) -> Result<Vec<(String, Vec<u8>)>> {
    if !s.from_env_file.is_empty() && (!s.from_file.is_empty() || !s.from_literal.is_empty()) {
        return Err(CliError::Usage(
            "from-env-file cannot be combined with from-file or from-literal".into(),
        ));
    }
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |key: String, value: Vec<u8>| -> Result<()> {
        if !valid_key(&key) {
            return Err(CliError::Usage(format!(
                "{key:?} is not a valid key name for a {kind}: a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            )));
        }
        if out.iter().any(|(k, _)| *k == key) {
            return Err(CliError::Usage(if kind == "Secret" {
                format!("cannot add key {key}, another key by that name already exists")
            } else {
                format!(
                    "cannot add key {key:?}, another key by that name already exists in Data for ConfigMap {name:?}"
                )
            }));
        }
        out.push((key, value));
        Ok(())
    };
    for source in &s.from_file {
        let (key, path) = file_source(source)?;
        let meta = std::fs::metadata(&path)
            .map_err(|e| CliError::Usage(format!("error reading {path}: {}", os_reason(&e))))?;
        if meta.is_dir() {
            if key.is_some() {
                return Err(CliError::Usage("cannot give a key name for a directory path".into()));
            }
            let mut entries: Vec<_> = std::fs::read_dir(&path)
                .map_err(|e| {
                    CliError::Usage(format!("error listing files in {path}: {}", os_reason(&e)))
                })?
                .filter_map(|e| e.ok())
                .collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let p = entry.path();
                if !p.is_file() {
                    continue;
                }
                let key = entry.file_name().to_string_lossy().into_owned();
                add(key, read(&p)?)?;
            }
        } else {
            let key = key.unwrap_or_else(|| {
                Path::new(&path)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
            add(key, read(Path::new(&path))?)?;
        }
    }
    for source in &s.from_literal {
        let (k, v) = literal(source)?;
        add(k, v.into_bytes())?;
    }
    for path in &s.from_env_file {
        let text = std::fs::read(path)
            .map_err(|e| CliError::Usage(format!("open {path}: {}", os_reason(&e))))?;
        for (k, v) in env_lines(&String::from_utf8_lossy(&text))? {
            add(k, v.into_bytes())?;
        }
    }
    Ok(out)
}

fn read(p: &Path) -> Result<Vec<u8>> {
    std::fs::read(p)
        .map_err(|e| CliError::Usage(format!("error reading {}: {}", p.display(), os_reason(&e))))
}

/// `KEY=value` lines of an env file: blank lines and `#` comments skipped, a leading BOM and
/// leading blanks dropped, a bare `KEY` taken from this process's environment if set.
pub fn env_lines(text: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = if i == 0 { line.trim_start_matches('\u{feff}') } else { line };
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (line.to_string(), None),
        };
        if !valid_env_name(&key) {
            return Err(CliError::Usage(format!(
                "{key:?} is not a valid key name: a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
            )));
        }
        match value {
            Some(v) => out.push((key, v)),
            None => {
                if let Ok(v) = std::env::var(&key) {
                    out.push((key, v));
                }
            }
        }
    }
    Ok(out)
}

fn valid_env_name(k: &str) -> bool {
    let mut chars = k.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// A ConfigMap: UTF-8 contents under `data`, others (base64) under `binaryData`.
pub fn configmap_object(name: &str, namespace: Option<&str>, entries: &[(String, Vec<u8>)]) -> Obj {
    let mut data = Vec::new();
    let mut binary = Vec::new();
    for (k, v) in entries {
        match std::str::from_utf8(v) {
            Ok(s) => data.push((k.clone(), s.to_string())),
            Err(_) => binary.push((k.clone(), STANDARD.encode(v))),
        }
    }
    let mut o = CONFIG_MAP.head(metadata(name, namespace, None));
    if !data.is_empty() {
        o.set("data", Obj::map(data));
    }
    if !binary.is_empty() {
        o.set("binaryData", Obj::map(binary));
    }
    o
}

/// A Secret: every value base64-encoded under `data`, then the type if one is given.
pub fn secret_object(
    name: &str,
    namespace: Option<&str>,
    entries: &[(String, Vec<u8>)],
    secret_type: Option<&str>,
) -> Obj {
    let mut o = SECRET.head(metadata(name, namespace, None));
    if !entries.is_empty() {
        o.set("data", Obj::map(entries.iter().map(|(k, v)| (k.clone(), STANDARD.encode(v)))));
    }
    if let Some(t) = secret_type.filter(|t| !t.is_empty()) {
        o.set("type", t);
    }
    o
}

/// The `.dockerconfigjson` of a registry login, as kubectl writes it.
pub fn docker_config(server: &str, user: &str, password: &str, email: Option<&str>) -> String {
    let mut entry = Obj::new().with("username", user).with("password", password);
    if let Some(e) = email.filter(|e| !e.is_empty()) {
        entry.set("email", e);
    }
    entry.set("auth", STANDARD.encode(format!("{user}:{password}")));
    let auths = Obj::new().with(server, entry);
    super::tree::Node::Obj(Obj::new().with("auths", auths)).compact()
}

pub async fn configmap(f: &Factory, a: ConfigMapArgs) -> Result<()> {
    let name = one_name(&a.name, "configmap")?;
    let entries = read_sources(&a.sources, "ConfigMap", &name)?;
    let ns = enforced_namespace(f).await?;
    let name = if a.append_hash {
        hashed_name(&name, &configmap_hash_input(&name, &entries))
    } else {
        name
    };
    let object = configmap_object(&name, ns.as_deref(), &entries);
    emit(f, &a.common, CONFIG_MAP, &name, object, Some("failed to create configmap: ")).await
}

pub async fn secret(f: &Factory, s: Secret) -> Result<()> {
    let (name, object, common) = match s {
        Secret::Generic(a) => {
            let name = one_name(&a.name, "secret generic")?;
            let entries = read_sources(&a.sources, "Secret", &name)?;
            let ns = enforced_namespace(f).await?;
            let name = if a.append_hash {
                let kind = a.secret_type.as_deref().unwrap_or_default();
                hashed_name(&name, &secret_hash_input(&name, kind, &entries))
            } else {
                name
            };
            let o = secret_object(&name, ns.as_deref(), &entries, a.secret_type.as_deref());
            (name, o, a.common)
        }
        Secret::Tls(a) => {
            let name = one_name(&a.name, "secret tls")?;
            let (Some(cert), Some(key)) = (a.cert.as_deref(), a.key.as_deref()) else {
                return Err(CliError::Usage("key and cert must be specified".into()));
            };
            let cert_pem = tls_file(cert)?;
            let key_pem = tls_file(key)?;
            check_pem_pair(&cert_pem, &key_pem)?;
            let ns = enforced_namespace(f).await?;
            let entries = vec![("tls.crt".to_string(), cert_pem), ("tls.key".to_string(), key_pem)];
            let o = secret_object(&name, ns.as_deref(), &entries, Some("kubernetes.io/tls"));
            (name, o, a.common)
        }
        Secret::DockerRegistry(a) => {
            let name = one_name(&a.name, "secret docker-registry")?;
            let (Some(user), Some(password)) =
                (a.docker_username.as_deref(), a.docker_password.as_deref())
            else {
                return Err(CliError::Usage(
                    "either --from-file or the combination of --docker-username, --docker-password and --docker-server is required".into(),
                ));
            };
            let config = docker_config(&a.docker_server, user, password, a.docker_email.as_deref());
            let ns = enforced_namespace(f).await?;
            let entries = vec![(".dockerconfigjson".to_string(), config.into_bytes())];
            let o = secret_object(
                &name,
                ns.as_deref(),
                &entries,
                Some("kubernetes.io/dockerconfigjson"),
            );
            (name, o, a.common)
        }
    };
    emit(f, &common, SECRET, &name, object, Some("failed to create secret ")).await
}

/// The PEM labels of a file's blocks (`CERTIFICATE`, `PRIVATE KEY`…).
fn pem_labels(pem: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(pem)
        .lines()
        .filter_map(|l| {
            l.trim().strip_prefix("-----BEGIN ")?.strip_suffix("-----").map(String::from)
        })
        .collect()
}

/// The first checks of Go's `tls.X509KeyPair`, worded as it words them (the key is not
/// matched against the certificate here).
pub fn check_pem_pair(cert: &[u8], key: &[u8]) -> Result<()> {
    let tls = |m: &str| CliError::Usage(format!("tls: {m}"));
    let certs = pem_labels(cert);
    if !certs.iter().any(|l| l == "CERTIFICATE") {
        return Err(if certs.iter().any(|l| l.ends_with("PRIVATE KEY")) {
            tls("found a private key rather than a certificate in the PEM for the certificate")
        } else {
            tls("failed to find any PEM data in certificate input")
        });
    }
    let keys = pem_labels(key);
    if !keys.iter().any(|l| l == "PRIVATE KEY" || l.ends_with(" PRIVATE KEY")) {
        return Err(if keys.iter().any(|l| l == "CERTIFICATE") {
            tls("found a certificate rather than a key in the PEM for the private key")
        } else {
            tls("failed to find any PEM data in key input")
        });
    }
    Ok(())
}

/// What kubectl's `ConfigMapHash` hashes: the kind, name, data and binary data as Go marshals
/// a map (keys sorted).
pub fn configmap_hash_input(name: &str, entries: &[(String, Vec<u8>)]) -> String {
    let mut data = Vec::new();
    let mut binary = Vec::new();
    for (k, v) in entries {
        match std::str::from_utf8(v) {
            Ok(s) => data.push((k.clone(), s.to_string())),
            Err(_) => binary.push((k.clone(), STANDARD.encode(v))),
        }
    }
    let mut o = Obj::new();
    if !binary.is_empty() {
        o.set("binaryData", Obj::map(binary));
    }
    o.set("data", Obj::map(data));
    o.set("kind", "ConfigMap");
    o.set("name", name);
    Node::Obj(o).compact()
}

/// What kubectl's `SecretHash` hashes: data (base64), kind, name and type, keys sorted.
pub fn secret_hash_input(name: &str, secret_type: &str, entries: &[(String, Vec<u8>)]) -> String {
    let data = Obj::map(entries.iter().map(|(k, v)| (k.clone(), STANDARD.encode(v))));
    Node::Obj(
        Obj::new()
            .with("data", data)
            .with("kind", "Secret")
            .with("name", name)
            .with("type", secret_type),
    )
    .compact()
}

/// `NAME-<hash>`: the SHA-256 of `input` in hex, its first ten characters with vowels and
/// look-alikes swapped as kubectl's `encodeHash` does.
pub fn hashed_name(name: &str, input: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(input.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let suffix: String = hex
        .chars()
        .take(10)
        .map(|c| match c {
            '0' => 'g',
            '1' => 'h',
            '3' => 'k',
            'a' => 'm',
            'e' => 't',
            c => c,
        })
        .collect();
    format!("{name}-{suffix}")
}

fn tls_file(path: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        CliError::Usage(format!("Cannot read file {path}, open {path}: {}", os_reason(&e)))
    })
}

#[cfg(test)]
mod tests;
