//! Impersonation, as upstream's `WithImpersonation` filter: a request carrying
//! `Impersonate-User` (with `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`)
//! acts as that user once the authorizer lets the requester `impersonate` each of them
//! (`users`, `groups`, `serviceaccounts` for `system:serviceaccount:<ns>:<name>`, and
//! `uids`/`userextras` in `authentication.k8s.io`). The impersonated user is authenticated, so
//! `system:authenticated` is added (unless a group says otherwise); a service account without
//! groups gets its own.

use std::collections::BTreeMap;

use hyper::HeaderMap;

use super::User;
use super::authorizer::{Attributes, Authorizer, ResourceAttributes, Target};
use crate::errors::ApiError;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// Percent-decodes an extra key, as upstream's `unescapeExtraKey`.
fn unescape(key: &str) -> String {
    let b = key.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&key[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user a request acts as: `requester`, or whom its impersonation headers name once each
/// is authorized.
pub fn impersonate(
    authz: &Authorizer,
    requester: User,
    headers: &HeaderMap,
) -> Result<User, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    };
    let name = values(USER).into_iter().next();
    let groups = values(GROUP);
    let uid = values(UID).into_iter().next();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix(EXTRA)
            && let Ok(v) = v.to_str()
        {
            extra.entry(unescape(key).to_lowercase()).or_default().push(v.to_string());
        }
    }
    let Some(name) = name else {
        if !groups.is_empty() || uid.is_some() || !extra.is_empty() {
            let mut asked: Vec<String> = groups.iter().map(|g| format!("groups={g}")).collect();
            asked.extend(uid.iter().map(|u| format!("uid={u}")));
            asked.extend(extra.keys().map(|k| format!("extra={k}")));
            return Err(ApiError::bad_request(format!(
                "requested [{}] without impersonating a user",
                asked.join(" ")
            )));
        }
        return Ok(requester);
    };
    let check = |group: &str, resource: &str, sub: &str, ns: &str, target: &str| {
        let attrs = ResourceAttributes {
            group,
            resource,
            subresource: sub,
            namespace: ns,
            name: target,
            field_selector: "",
        };
        authz.check(&Attributes {
            user: &requester,
            verb: "impersonate",
            target: Target::Resource(attrs),
        })
    };
    let account = name.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':'));
    match account {
        Some((ns, sa)) => check("", "serviceaccounts", "", ns, sa)?,
        None => check("", "users", "", "", &name)?,
    }
    for g in &groups {
        check("", "groups", "", "", g)?;
    }
    if let Some(u) = &uid {
        check("authentication.k8s.io", "uids", "", "", u)?;
    }
    for (k, vs) in &extra {
        for v in vs {
            check("authentication.k8s.io", "userextras", k, "", v)?;
        }
    }
    let mut user_groups = groups.clone();
    if let Some((ns, _)) = account
        && groups.is_empty()
    {
        user_groups.push("system:serviceaccounts".into());
        user_groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if name != "system:anonymous"
        && !user_groups.iter().any(|g| g == "system:authenticated" || g == "system:unauthenticated")
    {
        user_groups.push("system:authenticated".into());
    }
    Ok(User { name, uid: uid.unwrap_or_default(), groups: user_groups, extra })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::rbac::Rbac;
    use std::sync::Arc;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn masters_act_as_whom_they_name_and_others_may_not() {
        let authz = Authorizer::node_rbac(Arc::new(Rbac::default()));
        let admin = User {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        let as_alice =
            impersonate(&authz, admin.clone(), &headers(&[("Impersonate-User", "alice")])).unwrap();
        assert_eq!(
            (as_alice.name.as_str(), as_alice.groups.as_slice()),
            ("alice", &["system:authenticated".to_string()][..])
        );
        let sa = impersonate(
            &authz,
            admin.clone(),
            &headers(&[("Impersonate-User", "system:serviceaccount:a:web")]),
        )
        .unwrap();
        assert_eq!(
            sa.groups,
            ["system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"]
        );
        let grouped = impersonate(
            &authz,
            admin.clone(),
            &headers(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Group", "devs"),
                ("Impersonate-Extra-Scopes%2Fx", "s1"),
            ]),
        )
        .unwrap();
        assert_eq!(grouped.groups, ["devs", "system:authenticated"]);
        assert_eq!(grouped.extra["scopes/x"], ["s1"]);
        let same = impersonate(&authz, admin.clone(), &HeaderMap::new()).unwrap();
        assert_eq!(same, admin);
        let err =
            impersonate(&authz, admin, &headers(&[("Impersonate-Group", "devs")])).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "requested [groups=devs] without impersonating a user")
        );
        let eve = User {
            name: "eve".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        };
        let err = impersonate(&authz, eve, &headers(&[("Impersonate-User", "alice")])).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "users \"alice\" is forbidden: User \"eve\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
    }
}
