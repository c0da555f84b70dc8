//! The cluster's PKI in `--cert-dir`, made on first start: a CA, the serving certificate, an
//! admin client certificate (`system:masters`) plus an admin kubeconfig for the user, and the
//! client certificate the API server shows kubelets when it proxies logs and exec
//! (`apiserver-kubelet-client.crt`, `kube-apiserver-kubelet-client` in `system:masters`, as
//! kubeadm issues it), and for the scheduler and the controller-manager their own client
//! certificates and kubeconfigs (`scheduler.kubeconfig` as `system:kube-scheduler`,
//! `controller-manager.kubeconfig` as `system:kube-controller-manager`, the users the bootstrap
//! RBAC policy grants their roles to, as kubeadm's `scheduler.conf` and
//! `controller-manager.conf`). Later starts reuse what exists.

use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
}

/// The control-plane components given their own identity: file stem and user.
pub const COMPONENTS: [(&str, &str); 2] = [
    ("scheduler", "system:kube-scheduler"),
    ("controller-manager", "system:kube-controller-manager"),
];

/// PEM files of the PKI.
#[derive(Debug, Clone)]
pub struct Pki {
    pub dir: PathBuf,
    pub ca_cert: String,
    pub server_cert: String,
    pub server_key: String,
    /// The client certificate and key for kubelets' APIs.
    pub kubelet_client_cert: String,
    pub kubelet_client_key: String,
}

fn read(path: &Path) -> Result<Option<String>, CertError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CertError::Io { path: path.into(), source }),
    }
}

/// Written whole or not at all: a client may read the kubeconfig the moment it appears.
fn write(path: &Path, content: &str, private: bool) -> Result<(), CertError> {
    daemon::write_atomically(path, content.as_bytes(), if private { 0o600 } else { 0o644 })
        .map_err(|source| CertError::Io { path: path.into(), source })
}

fn validity(p: &mut CertificateParams) {
    p.not_before = rcgen::date_time_ymd(2024, 1, 1);
    p.not_after = rcgen::date_time_ymd(2124, 1, 1);
}

/// The CA's issuer, loaded from `dir` or created there.
fn ca(dir: &Path) -> Result<(String, Issuer<'static, KeyPair>), CertError> {
    let (cert_path, key_path) = (dir.join("ca.crt"), dir.join("ca.key"));
    if let (Some(cert), Some(key)) = (read(&cert_path)?, read(&key_path)?) {
        let issuer = Issuer::from_ca_cert_pem(&cert, KeyPair::from_pem(&key)?)?;
        return Ok((cert, issuer));
    }
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "apiserver-lite-ca");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params);
    let cert = params.self_signed(&key)?;
    write(&cert_path, &cert.pem(), false)?;
    write(&key_path, &key.serialize_pem(), true)?;
    Ok((cert.pem(), Issuer::new(params, key)))
}

/// Issues a client certificate: user `cn`, groups `orgs` (as the API server reads them: CN and O).
pub fn issue_client(dir: &Path, cn: &str, orgs: &[&str]) -> Result<(String, String), CertError> {
    let (_, issuer) = ca(dir)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, cn);
    for o in orgs {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    validity(&mut params);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Loads the PKI from `dir`, creating what is missing: CA, serving certificate for `sans` (DNS
/// names and IP addresses), and the admin client certificate.
pub fn ensure(dir: &Path, sans: &[String]) -> Result<Pki, CertError> {
    std::fs::create_dir_all(dir).map_err(|source| CertError::Io { path: dir.into(), source })?;
    let (ca_cert, issuer) = ca(dir)?;
    let (cert_path, key_path) = (dir.join("apiserver.crt"), dir.join("apiserver.key"));
    let (server_cert, server_key) = match (read(&cert_path)?, read(&key_path)?) {
        (Some(c), Some(k)) => (c, k),
        _ => {
            let key = KeyPair::generate()?;
            let mut params = CertificateParams::new(Vec::<String>::new())?;
            params.distinguished_name.push(DnType::CommonName, "apiserver-lite");
            for san in sans {
                params.subject_alt_names.push(match san.parse::<std::net::IpAddr>() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => SanType::DnsName(san.clone().try_into()?),
                });
            }
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            params.key_usages =
                vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
            validity(&mut params);
            let cert = params.signed_by(&key, &issuer)?;
            write(&cert_path, &cert.pem(), false)?;
            write(&key_path, &key.serialize_pem(), true)?;
            (cert.pem(), key.serialize_pem())
        }
    };
    for (stem, user, groups) in [("admin", "admin", &["system:masters"][..])]
        .into_iter()
        .chain(COMPONENTS.iter().map(|(stem, user)| (*stem, *user, &[][..])))
    {
        if read(&dir.join(format!("{stem}.crt")))?.is_none() {
            let (cert, key) = issue_client(dir, user, groups)?;
            write(&dir.join(format!("{stem}.crt")), &cert, false)?;
            write(&dir.join(format!("{stem}.key")), &key, true)?;
        }
    }
    let (kc_path, kk_path) =
        (dir.join("apiserver-kubelet-client.crt"), dir.join("apiserver-kubelet-client.key"));
    let (kubelet_client_cert, kubelet_client_key) = match (read(&kc_path)?, read(&kk_path)?) {
        (Some(c), Some(k)) => (c, k),
        _ => {
            let (c, k) = issue_client(dir, "kube-apiserver-kubelet-client", &["system:masters"])?;
            write(&kc_path, &c, false)?;
            write(&kk_path, &k, true)?;
            (c, k)
        }
    };
    Ok(Pki {
        dir: dir.to_path_buf(),
        ca_cert,
        server_cert,
        server_key,
        kubelet_client_cert,
        kubelet_client_key,
    })
}

/// A kubeconfig for `user` with a client certificate, trusting `ca_pem`.
pub fn kubeconfig(server: &str, ca_pem: &str, user: &str, cert_pem: &str, key_pem: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: apiserver-lite\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: {user}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: {user}@apiserver-lite\n  context:\n    cluster: apiserver-lite\n    user: {user}\n    namespace: default\ncurrent-context: {user}@apiserver-lite\n",
        b64(ca_pem),
        b64(cert_pem),
        b64(key_pem)
    )
}

/// Writes the kubeconfig (for `server`) of the certificate `<stem>.crt` into `path`.
fn write_kubeconfig(
    pki: &Pki,
    stem: &str,
    user: &str,
    server: &str,
    path: &Path,
) -> Result<(), CertError> {
    let cert = read(&pki.dir.join(format!("{stem}.crt")))?.unwrap_or_default();
    let key = read(&pki.dir.join(format!("{stem}.key")))?.unwrap_or_default();
    write(path, &kubeconfig(server, &pki.ca_cert, user, &cert, &key), true)
}

/// Writes the admin kubeconfig (for `server`) into `path`.
pub fn write_admin_kubeconfig(pki: &Pki, server: &str, path: &Path) -> Result<(), CertError> {
    write_kubeconfig(pki, "admin", "admin", server, path)
}

/// Writes `<cert-dir>/scheduler.kubeconfig` and `controller-manager.kubeconfig` (for `server`).
pub fn write_component_kubeconfigs(pki: &Pki, server: &str) -> Result<(), CertError> {
    for (stem, user) in COMPONENTS {
        write_kubeconfig(pki, stem, user, server, &pki.dir.join(format!("{stem}.kubeconfig")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pki_is_made_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = ensure(dir.path(), &["localhost".into(), "127.0.0.1".into()]).unwrap();
        let b = ensure(dir.path(), &["localhost".into()]).unwrap();
        assert_eq!(a.ca_cert, b.ca_cert);
        assert_eq!(a.server_cert, b.server_cert);
        assert!(dir.path().join("admin.crt").exists());
        assert_eq!(a.kubelet_client_cert, b.kubelet_client_cert);
        let der =
            rustls::pki_types::CertificateDer::from_pem_slice(a.kubelet_client_cert.as_bytes())
                .unwrap();
        let user = crate::auth::user_from_cert(&der).unwrap();
        assert_eq!(user.name, "kube-apiserver-kubelet-client");
        assert!(user.is_master());
        let (cert, _) = issue_client(dir.path(), "system:node:n1", &["system:nodes"]).unwrap();
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        let user = crate::auth::user_from_cert(&der).unwrap();
        assert_eq!(user.name, "system:node:n1");
        assert_eq!(user.groups, ["system:nodes", "system:authenticated"]);
        assert_eq!(user.node(), Some("n1"));
        write_component_kubeconfigs(&a, "https://127.0.0.1:6443").unwrap();
        let der = rustls::pki_types::CertificateDer::from_pem_slice(
            std::fs::read(dir.path().join("scheduler.crt")).unwrap().as_slice(),
        )
        .unwrap();
        let user = crate::auth::user_from_cert(&der).unwrap();
        assert_eq!(user.name, "system:kube-scheduler");
        assert!(!user.is_master());
        let written =
            std::fs::read_to_string(dir.path().join("controller-manager.kubeconfig")).unwrap();
        assert!(written.contains("current-context: system:kube-controller-manager@apiserver-lite"));
        let kc = kubeconfig("https://127.0.0.1:6443", &a.ca_cert, "admin", "c", "k");
        assert!(
            kc.contains("server: https://127.0.0.1:6443")
                && kc.contains("current-context: admin@apiserver-lite")
        );
    }
}
