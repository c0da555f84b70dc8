//! The secure API's serving certificate when none is configured (`tlsCertFile` and
//! `tlsPrivateKeyFile` unset): as upstream, a self-signed certificate in the certificate
//! directory (`--cert-dir`, default `<root-dir>/pki`) as `kubelet.crt` and `kubelet.key`, made on
//! first start for the node's names and addresses and reused afterwards.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose, SanType,
};

/// Why the serving certificate could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("making the kubelet's self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// A certificate chain and its key, PEM.
#[derive(Debug, Clone)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: String,
}

fn read(path: &Path) -> Result<Option<String>, CertError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CertError::Io { path: path.into(), source }),
    }
}

fn write(path: &Path, content: &str, mode: u32) -> Result<(), CertError> {
    daemon::write_atomically(path, content.as_bytes(), mode)
        .map_err(|source| CertError::Io { path: path.into(), source })
}

/// Reads the configured certificate and key files.
pub fn load(cert: &Path, key: &Path) -> Result<CertAndKey, CertError> {
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|source| CertError::Io { path: p.into(), source })
    };
    Ok(CertAndKey { cert_pem: read(cert)?, key_pem: read(key)? })
}

/// `kubelet.crt` and `kubelet.key` in `dir`, made (self-signed, valid for a year, for `names`:
/// DNS names and IP addresses) when either is missing.
pub fn self_signed(dir: &Path, names: &[String]) -> Result<CertAndKey, CertError> {
    let (cert_path, key_path) = (dir.join("kubelet.crt"), dir.join("kubelet.key"));
    if let (Some(cert_pem), Some(key_pem)) = (read(&cert_path)?, read(&key_path)?) {
        return Ok(CertAndKey { cert_pem, key_pem });
    }
    std::fs::create_dir_all(dir).map_err(|source| CertError::Io { path: dir.into(), source })?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let cn = names.first().cloned().unwrap_or_else(|| "kubelet".into());
    params.distinguished_name.push(DnType::CommonName, format!("{cn}@kubelet"));
    for name in names {
        let san = match name.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(name.clone().try_into()?),
        };
        if !params.subject_alt_names.contains(&san) {
            params.subject_alt_names.push(san);
        }
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    let now = jiff::Zoned::now().date();
    let day = |d: jiff::civil::Date| {
        rcgen::date_time_ymd(i32::from(d.year()), d.month().unsigned_abs(), d.day().unsigned_abs())
    };
    params.not_before = day(now.yesterday().unwrap_or(now));
    params.not_after = day(now.saturating_add(jiff::Span::new().years(1)));
    let cert = params.self_signed(&key)?;
    write(&cert_path, &cert.pem(), 0o644)?;
    write(&key_path, &key.serialize_pem(), 0o600)?;
    Ok(CertAndKey { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_self_signed_certificate_is_made_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let names = ["node-a".to_string(), "127.0.0.1".into(), "localhost".into()];
        let a = self_signed(&pki, &names).unwrap();
        let b = self_signed(&pki, &names[..1]).unwrap();
        assert_eq!(a.cert_pem, b.cert_pem);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(pki.join("kubelet.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(a.cert_pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let sans = cert.subject_alternative_name().unwrap().unwrap().value.general_names.len();
        assert_eq!(sans, 3);
        let err = load(&pki.join("missing.crt"), &pki.join("kubelet.key")).unwrap_err();
        assert!(err.to_string().contains("missing.crt"), "{err}");
    }
}
