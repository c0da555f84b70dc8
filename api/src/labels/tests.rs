use serde_json::json;

use super::*;

fn object(labels: Value) -> Value {
    json!({"metadata": {"name": "o", "labels": labels}})
}

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn each_operator_matches_as_upstream_matches_it() {
    let web = object(json!({"app": "x", "tier": "web", "rank": "3"}));
    let bare = json!({"metadata": {"name": "o"}});
    for (text, on_web, on_bare) in [
        ("app=x", true, false),
        ("app==x", true, false),
        ("app!=x", false, true),
        ("app=y", false, false),
        ("tier in (web, db)", true, false),
        ("tier notin (web)", false, true),
        ("tier", true, false),
        ("!tier", false, true),
        ("app=x,tier=web", true, false),
        ("app=x,tier in (db,api)", false, false),
        ("rank>2", true, false),
        ("rank>3", false, false),
        ("rank<4", true, false),
        ("tier>1", false, false),
        ("app=", false, false),
        ("", true, true),
        ("  app = x ,  tier  ", true, false),
    ] {
        let s = parse(text).unwrap();
        assert_eq!(s.matches(&web), on_web, "{text} on web");
        assert_eq!(s.matches(&bare), on_bare, "{text} on bare");
    }
}

#[test]
fn in_and_notin_are_values_where_a_value_stands() {
    let s = parse("in in (in,notin)").unwrap();
    assert!(s.matches(&object(json!({"in": "notin"}))));
    assert!(!s.matches(&object(json!({"in": "x"}))));
}

#[test]
fn empty_values_are_values() {
    let s = parse("a in (,x)").unwrap();
    assert!(s.matches(&object(json!({"a": ""}))));
    assert!(parse("a in ()").unwrap().matches(&object(json!({"a": ""}))));
}

#[test]
fn a_key_named_twice_keeps_both_requirements() {
    let s = parse("app=x,app=y").unwrap();
    assert!(!s.matches(&object(json!({"app": "x"}))));
}

#[test]
fn syntax_errors_are_worded_as_upstreams_parser_words_them() {
    let op = "expected: in, notin, =, ==, !=, gt, lt";
    assert_eq!(error("a b"), format!("unable to parse requirement: found 'b', {op}"));
    assert_eq!(error("a in (x"), "unable to parse requirement: found '', expected: ',' or ')'");
    assert_eq!(error("a=(x)"), "unable to parse requirement: found '(', expected: identifier");
    assert_eq!(error("!"), "unable to parse requirement: found '', expected: identifier");
    assert_eq!(error("a=b c"), "found 'c', expected: ',' or 'end of string'");
    assert_eq!(error("a,"), "found '', expected: identifier after ','");
    assert_eq!(error("=a"), "found '=', expected: !, identifier, or 'end of string'");
    assert_eq!(error("a in x"), "unable to parse requirement: found 'x' expected: '('");
    assert_eq!(error("!a=b"), "found '=', expected: ',' or 'end of string'");
}

#[test]
fn bad_keys_and_values_are_refused_by_new_requirements_checks() {
    assert_eq!(
        error("a>x"),
        "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert!(error("a=-x").starts_with(
        "unable to parse requirement: values[0][a]: Invalid value: \"-x\": a valid label must be"
    ));
    assert!(error("a>-1x").starts_with("unable to parse requirement: [values[0]: "));
    assert!(error("a/b/c").starts_with(
        "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must"
    ));
}

// Both lists as kubectl v1.35 judged them (`kubectl drain n --pod-selector S`).
#[test]
fn selectors_kubectl_accepts_parse() {
    for s in [
        "",
        "app=web",
        "app==web,tier!=db",
        "app = web",
        "example.com/app=web",
        "!legacy",
        "legacy",
        "env in (a, b),tier notin (x)",
        "app=",
        "a=in",
        // `in` and `notin` are read as identifiers where a key or value stands.
        "in=x",
        "notin=x",
        "env in ()",
        "replicas>1,replicas<5",
    ] {
        assert!(parse(s).is_ok(), "{s:?}");
    }
}

#[test]
fn selectors_kubectl_refuses_do_not_parse() {
    for s in [
        "app=web,",
        ",app=web",
        "app=we b",
        "app=-web",
        "env in (a",
        "env in a",
        "replicas>x",
        "bad key=x",
        "a/b/c=x",
        "app=web)",
        "!",
    ] {
        assert!(parse(s).is_err(), "{s:?}");
    }
}
