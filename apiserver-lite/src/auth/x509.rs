//! Client certificates: the user is the subject's CN, its groups the O attributes (the TLS
//! layer has already verified the chain against `--client-ca-file`).

use super::User;

/// The user a client certificate names: CN, and O as groups.
pub fn user_from_cert(der: &[u8]) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let mut groups: Vec<String> =
        subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
    groups.push("system:authenticated".into());
    Some(User { name, groups, ..User::default() })
}
