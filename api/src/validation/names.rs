//! Name validators with upstream's rules and messages (`k8s.io/apimachinery/pkg/util/validation`).
//! Each returns the problems found; empty means valid.

pub const DNS1123_LABEL_MAX: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
pub const LABEL_VALUE_MAX: usize = 63;
pub const IANA_SVC_NAME_MAX: usize = 15;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_MAP_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";
const C_IDENTIFIER_MSG: &str = "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'";

/// `must be no more than N characters`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// Upstream's `RegexError`: the message, examples (joined with its `',  or '` quirk) and regex.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn is_label_body(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_subdomain_body(s: &str) -> bool {
    s.split('.').all(is_label_body)
}

/// Alphanumeric at both ends, `-_.` allowed inside (qualified names, label values).
fn is_qualified_body(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `IsDNS1123Label`.
pub fn dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !is_label_body(v) {
        if is_subdomain_body(v) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`, as the first problem (used where one message suffices).
pub fn dns1123_subdomain(v: &str) -> Option<String> {
    dns1123_subdomain_all(v).into_iter().next()
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain_all(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !is_subdomain_body(v) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `IsQualifiedName`: label and annotation keys, `[prefix/]name`.
pub fn qualified_name(v: &str) -> Vec<String> {
    let parts: Vec<&str> = v.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => {
            let msg = format!("a qualified name {QUALIFIED_NAME_MSG}");
            return vec![format!(
                "{} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(&msg, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            )];
        }
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(dns1123_subdomain_all(p).into_iter().map(|e| format!("prefix part {e}")));
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > DNS1123_LABEL_MAX {
        errs.push(format!("name part {}", max_len_error(DNS1123_LABEL_MAX)));
    }
    if !name.is_empty() && !is_qualified_body(name) {
        let msg = format!("name part {QUALIFIED_NAME_MSG}");
        errs.push(regex_error(&msg, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !v.is_empty() && !is_qualified_body(v) {
        errs.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// `IsConfigMapKey`: a key of a ConfigMap's or Secret's data, which becomes a file name, so
/// it may not be `.`, `..` or start with `..`.
pub fn config_map_key(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if v.is_empty() || !v.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._".contains(&c)) {
        errs.push(regex_error(
            CONFIG_MAP_KEY_MSG,
            CONFIG_MAP_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match v {
        "." => errs.push("must not be '.'".to_string()),
        ".." => errs.push("must not be '..'".to_string()),
        _ if v.starts_with("..") => errs.push("must not start with '..'".to_string()),
        _ => {}
    }
    errs
}

/// `IsCIdentifier`.
pub fn c_identifier(v: &str) -> Vec<String> {
    let b = v.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if ok {
        Vec::new()
    } else {
        vec![regex_error(C_IDENTIFIER_MSG, C_IDENTIFIER_FMT, &["my_name", "MY_NAME", "MyName"])]
    }
}

/// `IsRelaxedEnvVarName` (upstream's rule since `RelaxedEnvironmentVariableValidation`): not
/// empty, printable ASCII other than `=`.
pub fn env_var_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.is_empty() {
        errs.push("environment variable name must not be empty".to_string());
    }
    if v.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
                .to_string(),
        );
    }
    errs
}

/// `IsValidPortName` (IANA service name).
pub fn port_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > IANA_SVC_NAME_MAX {
        errs.push(max_len_error(IANA_SVC_NAME_MAX));
    }
    if !v.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-') {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !v.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if v.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if v.starts_with('-') || v.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// `IsValidPortNum`.
pub fn port_num(port: i32) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".to_string()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(dns1123_label("my-name").is_empty());
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
        let err = &dns1123_label("Nginx")[0];
        assert_eq!(
            err,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        );
        assert_eq!(dns1123_label(&"a".repeat(64)), [max_len_error(63)]);
        assert!(dns1123_subdomain("nginx-pod.node-1").is_none());
        assert!(dns1123_subdomain("-x").is_some());
        assert!(dns1123_subdomain("a..b").is_some());
        assert_eq!(dns1123_subdomain_all(&"a".repeat(254)).len(), 1);
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(qualified_name("app").is_empty());
        assert!(qualified_name("example.com/My_name.x").is_empty());
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert!(qualified_name("-bad")[0].starts_with("name part must consist"));
        assert!(label_value("").is_empty() && label_value("v1.2_x").is_empty());
        assert_eq!(label_value(&"v".repeat(64)).len(), 1);
        assert_eq!(label_value("bad value").len(), 1);
    }

    #[test]
    fn config_keys_are_file_names_that_cannot_climb() {
        for ok in ["key.name", "KEY_NAME", "key-name", ".hidden", "a..b", ".dockerconfigjson"] {
            assert!(config_map_key(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            config_map_key("a b"),
            [
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(config_map_key("."), ["must not be '.'"]);
        assert_eq!(config_map_key(".."), ["must not be '..'"]);
        assert_eq!(config_map_key("..data"), ["must not start with '..'"]);
        assert_eq!(config_map_key("a/b").len(), 1);
        assert_eq!(config_map_key(""), config_map_key(" "));
        assert_eq!(config_map_key(&"k".repeat(254)), [max_len_error(253)]);
    }

    #[test]
    fn ports_and_identifiers() {
        assert!(port_name("http").is_empty() && port_name("web-1").is_empty());
        assert_eq!(port_name("8080"), ["must contain at least one letter (a-z)"]);
        assert_eq!(port_name("a--b"), ["must not contain consecutive hyphens"]);
        assert_eq!(port_name("a-very-long-port-name").len(), 1);
        assert_eq!(port_num(0).len(), 1);
        assert!(port_num(65535).is_empty());
        assert!(c_identifier("MY_VAR1").is_empty());
        assert_eq!(c_identifier("1VAR").len(), 1);
    }
}
