//! Routing: request paths to [`Route`]s, and query parameters as the clients send them (kube-rs
//! starts its query with an empty parameter; booleans are `true`, `True` or `1`).

use crate::errors::ApiError;
use crate::resources::{self, ResourceType, Subresource};

/// A request for one resource type: collection, object or subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    pub resource: &'static ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<Subresource>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    Health,
    /// `/api`: the legacy group's versions.
    Api,
    /// `/apis`: every other group.
    Apis,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1`, `/apis/<group>/<version>`: the resources of a group version.
    GroupVersion(String, String),
    OpenApiV3,
    OpenApiV3GroupVersion(String, String),
    OpenApiV2,
    /// `/.well-known/openid-configuration`: the service-account issuer's discovery document.
    OpenIdConfiguration,
    /// `/openid/v1/jwks`: its keys.
    OpenIdKeys,
    Resource(ResourceRequest),
}

/// Routes a path; 404 for paths this server does not serve.
pub fn route(path: &str) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Ok(Route::Version),
        ["healthz" | "readyz" | "livez", ..] => Ok(Route::Health),
        ["api"] => Ok(Route::Api),
        ["apis"] => Ok(Route::Apis),
        ["apis", group] => Ok(Route::Group((*group).to_string())),
        ["openapi", "v3"] => Ok(Route::OpenApiV3),
        ["openapi", "v3", "api", version] => {
            Ok(Route::OpenApiV3GroupVersion(String::new(), (*version).to_string()))
        }
        ["openapi", "v3", "apis", group, version] => {
            Ok(Route::OpenApiV3GroupVersion((*group).to_string(), (*version).to_string()))
        }
        ["openapi", "v2"] => Ok(Route::OpenApiV2),
        [".well-known", "openid-configuration"] => Ok(Route::OpenIdConfiguration),
        ["openid", "v1", "jwks"] => Ok(Route::OpenIdKeys),
        ["api", version] => Ok(Route::GroupVersion(String::new(), (*version).to_string())),
        ["apis", group, version] => {
            Ok(Route::GroupVersion((*group).to_string(), (*version).to_string()))
        }
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Err(ApiError::path_not_found()),
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Result<Route, ApiError> {
    let (namespace, rest) = match rest {
        ["namespaces", ns, resource, more @ ..]
            if resources::find(group, version, resource).is_some_and(|r| r.namespaced) =>
        {
            (Some((*ns).to_string()), [&[*resource][..], more].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let (resource, name, sub) = match rest.as_slice() {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(*n), None),
        [r, n, s] => (*r, Some(*n), Some(*s)),
        // A proxy's path goes on past the subresource; the handler reads it from the URI.
        [r, n, s @ "proxy", _, ..] => (*r, Some(*n), Some(*s)),
        _ => return Err(ApiError::path_not_found()),
    };
    let resource =
        resources::find(group, version, resource).ok_or_else(ApiError::path_not_found)?;
    let subresource = match sub {
        None => None,
        Some(s) => {
            Some(Subresource::parse(s).filter(|sub| resource.has_subresource(*sub)).ok_or_else(
                || {
                    ApiError::bad_request(format!(
                        "subresource {s:?} is not served for {}",
                        resource.qualified()
                    ))
                },
            )?)
        }
    };
    if resource.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    Ok(Route::Resource(ResourceRequest {
        resource,
        namespace,
        name: name.map(str::to_string),
        subresource,
    }))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A resource request's verb, as upstream's RequestInfo names it from the method, whether a
/// name is given, and `watch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    pub fn of(method: &hyper::Method, named: bool, watch: bool) -> Option<Verb> {
        use hyper::Method;
        Some(match (method, named, watch) {
            (&Method::GET, false, true) => Verb::Watch,
            (&Method::GET, false, false) => Verb::List,
            (&Method::GET, true, _) => Verb::Get,
            (&Method::POST, _, _) => Verb::Create,
            (&Method::PUT, _, _) => Verb::Update,
            (&Method::PATCH, _, _) => Verb::Patch,
            (&Method::DELETE, true, _) => Verb::Delete,
            (&Method::DELETE, false, _) => Verb::DeleteCollection,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// Query parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(q: Option<&str>) -> Self {
        Query(
            q.unwrap_or_default()
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (percent_decode(k), percent_decode(v)),
                    None => (percent_decode(p), String::new()),
                })
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Go's `strconv.ParseBool` truths.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("true" | "True" | "TRUE" | "1" | "t" | "T"))
    }

    pub fn number(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid {name} {v:?}: not an integer"))
                })
            })
            .transpose()
    }

    pub fn dry_run(&self) -> bool {
        self.0.iter().any(|(k, v)| k == "dryRun" && v == "All")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourceRequest {
        match route(path).unwrap() {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn routes_namespaced_cluster_and_subresource_paths() {
        let r = res("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            (
                r.resource.name,
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.subresource.map(Subresource::as_str)
            ),
            ("pods", Some("default"), Some("web"), Some("status"))
        );
        let r = res("/api/v1/pods");
        assert_eq!((r.resource.name, r.namespace, r.name), ("pods", None, None));
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!((r.resource.name, r.name.as_deref()), ("namespaces", Some("kube-system")));
        let r = res("/api/v1/namespaces/x/finalize");
        assert_eq!(
            (r.resource.name, r.name.as_deref(), r.subresource.map(Subresource::as_str)),
            ("namespaces", Some("x"), Some("finalize"))
        );
        let r = res("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!(
            (r.resource.kind, r.subresource.map(Subresource::as_str)),
            ("Deployment", Some("scale"))
        );
        let r = res("/api/v1/nodes/n1");
        assert_eq!((r.resource.name, r.name.as_deref(), r.namespace), ("nodes", Some("n1"), None));
        assert_eq!(
            route("/apis/apps/v1").unwrap(),
            Route::GroupVersion("apps".into(), "v1".into())
        );
        assert_eq!(
            route("/openapi/v3/api/v1").unwrap(),
            Route::OpenApiV3GroupVersion(String::new(), "v1".into())
        );
        assert_eq!(route("/.well-known/openid-configuration").unwrap(), Route::OpenIdConfiguration);
        assert_eq!(route("/openid/v1/jwks").unwrap(), Route::OpenIdKeys);
        let r = res("/api/v1/namespaces/default/serviceaccounts/default/token");
        assert_eq!(
            (r.resource.name, r.subresource.map(Subresource::as_str)),
            ("serviceaccounts", Some("token"))
        );
        assert_eq!(route("/api/v1/widgets").unwrap_err().code, 404);
        assert_eq!(
            route("/api/v1/pods/web").unwrap_err().code,
            404,
            "a namespaced object needs its namespace"
        );
        assert_eq!(route("/api/v1/namespaces/d/pods/web/bogus").unwrap_err().code, 400);
    }

    #[test]
    fn queries_as_clients_send_them() {
        let q = Query::parse(Some(
            "&watch=true&labelSelector=app%3Dweb%2Ctier+in+%28a%29&limit=500&dryRun=All",
        ));
        assert!(q.flag("watch"));
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a)"));
        assert_eq!(q.number("limit").unwrap(), Some(500));
        assert!(q.dry_run());
        assert!(Query::parse(Some("watch=1")).flag("watch"));
        assert!(Query::parse(Some("watch=True")).flag("watch"));
        assert!(!Query::parse(None).flag("watch"));
        assert_eq!(Query::parse(Some("limit=x")).number("limit").unwrap_err().code, 400);
    }
}
