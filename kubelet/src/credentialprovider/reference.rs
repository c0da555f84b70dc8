//! The repository an image is pulled from, as upstream's `ParseImageName` names it through
//! Docker's `ParseNormalizedNamed`: no tag or digest, the registry spelled out (`docker.io`
//! when none is given), and Docker Hub's official images under `library/`.

const DEFAULT_DOMAIN: &str = "docker.io";
const LEGACY_DEFAULT_DOMAIN: &str = "index.docker.io";

/// `busybox:1.35` → `docker.io/library/busybox`; `127.0.0.1:5000/team/app@sha256:…` →
/// `127.0.0.1:5000/team/app`.
pub fn repository(image: &str) -> String {
    let name = image.split_once('@').map_or(image, |(n, _)| n);
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let name = match name[last_slash..].rfind(':') {
        Some(i) => &name[..last_slash + i],
        None => name,
    };
    let (domain, remainder) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_lowercase() != first =>
        {
            (first, rest.to_string())
        }
        _ => (DEFAULT_DOMAIN, name.to_string()),
    };
    let domain = if domain == LEGACY_DEFAULT_DOMAIN { DEFAULT_DOMAIN } else { domain };
    let remainder = if domain == DEFAULT_DOMAIN && !remainder.contains('/') {
        format!("library/{remainder}")
    } else {
        remainder
    };
    format!("{domain}/{remainder}")
}

/// The image fully spelled: [`repository`] with its tag (`latest` when neither a tag nor a
/// digest is given) or digest, so `busybox` and `docker.io/library/busybox:latest` compare
/// equal.
pub fn normalized(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let tag = name[last_slash..].rfind(':').map(|i| &name[last_slash + i + 1..]);
    let repository = repository(image);
    match (tag, digest) {
        (_, Some(d)) => format!("{repository}@{d}"),
        (Some(t), None) => format!("{repository}:{t}"),
        (None, None) => format!("{repository}:latest"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_name_their_registry_and_repository() {
        assert_eq!(repository("busybox"), "docker.io/library/busybox");
        assert_eq!(repository("busybox:1.35"), "docker.io/library/busybox");
        assert_eq!(repository("me/app:v1"), "docker.io/me/app");
        assert_eq!(repository("index.docker.io/nginx"), "docker.io/library/nginx");
        assert_eq!(repository("localhost/pause:1.0"), "localhost/pause");
        assert_eq!(repository("127.0.0.1:5000/busybox:1.35"), "127.0.0.1:5000/busybox");
        assert_eq!(repository("127.0.0.1:5000/team/app@sha256:ab"), "127.0.0.1:5000/team/app");
        assert_eq!(repository("quay.io/a/b:c@sha256:ab"), "quay.io/a/b");
        assert_eq!(repository("localhost:5000/x"), "localhost:5000/x");
    }

    #[test]
    fn images_spelled_differently_normalize_alike() {
        assert_eq!(normalized("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalized("docker.io/library/busybox:latest"), normalized("busybox"));
        assert_eq!(normalized("busybox:1.35"), "docker.io/library/busybox:1.35");
        assert_eq!(normalized("localhost:5000/x"), "localhost:5000/x:latest");
        assert_eq!(normalized("quay.io/a/b:c@sha256:ab"), "quay.io/a/b@sha256:ab");
        assert_ne!(normalized("busybox:1.35"), normalized("busybox:1.36"));
    }
}
