use super::super::tree::Node;
use super::*;

fn sources(files: &[&str], literals: &[&str], env: &[&str]) -> Sources {
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
    Sources { from_file: v(files), from_literal: v(literals), from_env_file: v(env) }
}

#[test]
fn a_literal_without_an_equals_sign_is_refused_as_kubectl_words_it() {
    assert_eq!(
        literal("a").unwrap_err().to_string(),
        "error: invalid literal source a, expected key=value"
    );
    assert_eq!(literal("a=b=c").unwrap(), ("a".into(), "b=c".into()));
}

#[test]
fn file_sources_name_their_key_or_take_the_base_name() {
    assert_eq!(file_source("dir/f.txt").unwrap(), (None, "dir/f.txt".into()));
    assert_eq!(file_source("k=f.txt").unwrap(), (Some("k".into()), "f.txt".into()));
    assert_eq!(
        file_source("=x").unwrap_err().to_string(),
        "error: key name for file path x missing"
    );
    assert_eq!(
        file_source("k=").unwrap_err().to_string(),
        "error: file path for key name k missing"
    );
    assert_eq!(
        file_source("a=b=c").unwrap_err().to_string(),
        "error: key names or file paths cannot contain '='"
    );
}

#[test]
fn files_directories_and_literals_become_keys() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, "a=1\n").unwrap();
    let sub = dir.path().join("d");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("k1"), "hi\n").unwrap();
    std::fs::create_dir(sub.join("nested")).unwrap();
    let f = f.to_string_lossy().into_owned();
    let d = sub.to_string_lossy().into_owned();
    let s = sources(&[&f, &format!("k={f}"), &d], &["a=b"], &[]);
    let entries = read_sources(&s, "ConfigMap", "c").unwrap();
    let cm = Node::Obj(configmap_object("c", None, &entries)).compact();
    assert_eq!(
        cm,
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"},"data":{"a":"b","f.txt":"a=1\n","k":"a=1\n","k1":"hi\n"}}"#
    );
    let keyed_dir = sources(&[&format!("k={d}")], &[], &[]);
    assert_eq!(
        read_sources(&keyed_dir, "ConfigMap", "c").unwrap_err().to_string(),
        "error: cannot give a key name for a directory path"
    );
}

#[test]
fn a_missing_file_and_a_duplicate_key_are_refused() {
    let s = sources(&["/nonexistent/x"], &[], &[]);
    assert_eq!(
        read_sources(&s, "ConfigMap", "c").unwrap_err().to_string(),
        "error: error reading /nonexistent/x: no such file or directory"
    );
    let dup = sources(&[], &["a=b", "a=c"], &[]);
    assert_eq!(
        read_sources(&dup, "ConfigMap", "c").unwrap_err().to_string(),
        "error: cannot add key \"a\", another key by that name already exists in Data for ConfigMap \"c\""
    );
    assert_eq!(
        read_sources(&dup, "Secret", "s").unwrap_err().to_string(),
        "error: cannot add key a, another key by that name already exists"
    );
    let bad = sources(&[], &["a/b=c"], &[]);
    assert!(
        read_sources(&bad, "ConfigMap", "c")
            .unwrap_err()
            .to_string()
            .starts_with("error: \"a/b\" is not a valid key name for a ConfigMap: ")
    );
}

#[test]
fn env_files_skip_comments_and_cannot_be_mixed() {
    assert_eq!(
        env_lines("\u{feff}X=1\n# c\n\n  Y=two words\n").unwrap(),
        vec![("X".into(), "1".into()), ("Y".into(), "two words".into())]
    );
    assert!(env_lines("1X=2").is_err());
    let mixed = sources(&[], &["a=b"], &["e.env"]);
    assert_eq!(
        read_sources(&mixed, "ConfigMap", "c").unwrap_err().to_string(),
        "error: from-env-file cannot be combined with from-file or from-literal"
    );
}

#[test]
fn binary_contents_go_to_binary_data_and_secrets_encode_everything() {
    let entries = vec![("bin".to_string(), vec![0xff, 0xfe]), ("x".to_string(), b"y".to_vec())];
    let cm = Node::Obj(configmap_object("c", None, &entries)).to_value();
    assert_eq!(cm["binaryData"]["bin"], "//4=");
    assert_eq!(cm["data"]["x"], "y");
    let s = Node::Obj(secret_object("s", Some("ns"), &entries, Some("foo"))).compact();
    assert_eq!(
        s,
        r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns"},"data":{"bin":"//4=","x":"eQ=="},"type":"foo"}"#
    );
}

#[test]
fn a_docker_config_is_kubectls_json() {
    assert_eq!(
        docker_config("https://index.docker.io/v1/", "u", "p", Some("e")),
        r#"{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p","email":"e","auth":"dTpw"}}}"#
    );
}

#[test]
fn tls_pairs_need_a_certificate_and_a_key_as_go_words_it() {
    let cert = b"-----BEGIN CERTIFICATE-----\nMII=\n-----END CERTIFICATE-----\n";
    let key = b"-----BEGIN PRIVATE KEY-----\nMII=\n-----END PRIVATE KEY-----\n";
    assert!(check_pem_pair(cert, key).is_ok());
    let err = |c: &[u8], k: &[u8]| check_pem_pair(c, k).unwrap_err().to_string();
    assert_eq!(err(b"a=1", key), "error: tls: failed to find any PEM data in certificate input");
    assert_eq!(err(cert, b"a=1"), "error: tls: failed to find any PEM data in key input");
    assert_eq!(
        err(cert, cert),
        "error: tls: found a certificate rather than a key in the PEM for the private key"
    );
}

#[test]
fn appended_hashes_are_kubectls() {
    let lit = vec![("a".to_string(), b"b".to_vec())];
    assert_eq!(hashed_name("c", &configmap_hash_input("c", &lit)), "c-m4h6ctkgb2");
    let both = vec![("a".to_string(), b"b".to_vec()), ("bin".to_string(), vec![0xff, 0xfe])];
    assert_eq!(hashed_name("c", &configmap_hash_input("c", &both)), "c-75ctf2h8hf");
    assert_eq!(hashed_name("c", &configmap_hash_input("c", &[])), "c-94b26g54cg");
    assert_eq!(hashed_name("s", &secret_hash_input("s", "", &lit)), "s-7fd2tm89d8");
    assert_eq!(hashed_name("s", &secret_hash_input("s", "foo", &lit)), "s-76gkfd766k");
    assert_eq!(hashed_name("s", &secret_hash_input("s", "", &[])), "s-6cmg28h685");
}
