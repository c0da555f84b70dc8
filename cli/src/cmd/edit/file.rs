//! The file `edit` hands the editor, pure: kubectl's header comment with the reasons an edit
//! is asked again, comments stripped as kubectl strips them (`ManualStrip`, and content
//! compared as the JSON of its YAML), an empty file told apart, and the editor's command line
//! from `KUBE_EDITOR`, `EDITOR` or `vi` as kubectl builds it.

use serde::Deserialize;
use serde_json::Value;

/// A reason the file is opened again: a head line, and its items (`* field: message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    pub head: String,
    pub other: Vec<String>,
}

/// kubectl's header of the file, with the reasons (if any) below it.
pub fn header(reasons: &[Reason]) -> String {
    let mut out = String::from(
        "# Please edit the object below. Lines beginning with a '#' will be ignored,\n\
         # and an empty file will abort the edit. If an error occurs while saving this file will be\n\
         # reopened with the relevant failures.\n\
         #\n",
    );
    for r in reasons {
        let colon = if r.other.is_empty() { "" } else { ":" };
        out.push_str(&format!("# {}{colon}\n", hash_on_line_break(&r.head)));
        for o in &r.other {
            out.push_str(&format!("# * {}\n", hash_on_line_break(o)));
        }
        out.push_str("#\n");
    }
    out
}

/// Line breaks inside a comment continued as comments (`\n` → `\n# ` unless a `#` follows).
fn hash_on_line_break(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' && chars.peek().is_some_and(|n| *n != '#') {
            out.push_str("\n# ");
        } else {
            out.push(c);
        }
    }
    out
}

/// The text without its comment lines (`#…`, but not `#!…`), kubectl's `ManualStrip`.
pub fn manual_strip(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.starts_with('#') && !t.starts_with("#!") {
            continue;
        }
        out.push_str(line);
        if i + 1 < lines.len() {
            out.push('\n');
        }
    }
    out
}

/// What kubectl compares of two versions of the file (`StripComments`): the content of its
/// first YAML (or JSON) document, or the text without comments when it does not parse.
#[derive(Debug, PartialEq)]
pub enum Content {
    Parsed(Value),
    Text(String),
}

pub fn content(text: &str) -> Content {
    match serde_yaml_ng::from_str::<Value>(text) {
        Ok(v) => Content::Parsed(v),
        Err(_) => Content::Text(manual_strip(text)),
    }
}

/// kubectl's validation of the edited file (before the server sees it): its first document
/// must parse, be an object and name its `apiVersion` and `kind`; the reason worded as
/// kubectl's validator (`yaml: line N: …` as go-yaml, which shares libyaml's problems).
pub fn validate(text: &str) -> Result<(), String> {
    let stripped = match serde_yaml_ng::from_str::<Value>(text) {
        Ok(_) => text.to_string(),
        Err(_) => manual_strip(text),
    };
    let first = serde_yaml_ng::Deserializer::from_str(&stripped).next();
    let value = match first.map(Value::deserialize) {
        None => Value::Null,
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(go_yaml_error(&e)),
    };
    let Value::Object(m) = value else { return Err("invalid object to validate".into()) };
    for (key, name) in [("apiVersion", "apiVersion"), ("kind", "kind")] {
        if m.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(format!("{name} not set"));
        }
    }
    Ok(())
}

/// A YAML parse error as go-yaml words it: `yaml: line N: problem`.
fn go_yaml_error(e: &serde_yaml_ng::Error) -> String {
    let text = e.to_string();
    let problem = text.split(" at line ").next().unwrap_or(&text).to_string();
    match e.location() {
        Some(l) => format!("yaml: line {}: {problem}", l.line()),
        None => format!("yaml: {problem}"),
    }
}

/// Whether any line holds more than blanks and comments.
pub fn has_lines(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    })
}

/// The editor's command line for `path`: the first of `KUBE_EDITOR` and `EDITOR` set, else
/// `vi`; split at spaces, or when it quotes or escapes, run by `$SHELL -c` (`/bin/bash`
/// without one) with the path quoted after it.
pub fn editor_argv(
    kube_editor: Option<&str>,
    editor: Option<&str>,
    shell: Option<&str>,
    path: &str,
) -> Vec<String> {
    let chosen =
        [kube_editor, editor].into_iter().flatten().find(|e| !e.is_empty()).unwrap_or("vi");
    if !chosen.contains(' ') {
        return vec![chosen.to_string(), path.to_string()];
    }
    if !chosen.contains(['"', '\'', '\\']) {
        let mut argv: Vec<String> = chosen.split(' ').map(str::to_string).collect();
        argv.push(path.to_string());
        return argv;
    }
    let shell = shell.filter(|s| !s.is_empty()).unwrap_or("/bin/bash");
    vec![shell.to_string(), "-c".into(), format!("{chosen} {}", go_quote(path))]
}

/// Go's `%q` of a path (printable ASCII as is, `"` and `\` escaped).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_header_lists_each_reason_and_its_causes_as_comments() {
        let reasons = [
            Reason {
                head: "pods \"a\" was not valid".into(),
                other: vec!["spec: bad\nvery".into()],
            },
            Reason { head: "The edited file had a syntax error: x".into(), other: vec![] },
        ];
        let h = header(&reasons);
        assert!(h.starts_with("# Please edit the object below."));
        assert!(h.ends_with(
            "#\n# pods \"a\" was not valid:\n# * spec: bad\n# very\n#\n# The edited file had a syntax error: x\n#\n"
        ));
    }

    #[test]
    fn comments_are_stripped_and_content_compared_as_parsed() {
        assert_eq!(manual_strip("# a\nb: 1\n  # c\n#!keep\n"), "b: 1\n#!keep\n");
        assert_eq!(content("# header\na: 1\n"), content("a:   1 # same\n"));
        assert_ne!(content("a: 1\n"), content("a: 2\n"));
        assert_eq!(content("a: [\n"), Content::Text("a: [\n".into()));
        assert_eq!(content("a: 1"), Content::Parsed(json!({"a": 1})));
        assert!(!has_lines("# only\n   \n# comments\n"));
        assert!(has_lines("# c\nkind: Pod\n"));
    }

    #[test]
    fn validation_wants_an_object_with_api_version_and_kind() {
        assert_eq!(validate("# h\napiVersion: v1\nkind: Pod\n"), Ok(()));
        assert_eq!(validate("# h\n"), Err("invalid object to validate".into()));
        assert_eq!(validate("kind: Pod\n"), Err("apiVersion not set".into()));
        assert_eq!(validate("apiVersion: v1\n"), Err("kind not set".into()));
        assert_eq!(
            validate("# h\napiVersion: v1\nkind: Pod oops: x\n"),
            Err("yaml: line 2: mapping values are not allowed in this context".into())
        );
    }

    #[test]
    fn the_editor_comes_from_kube_editor_then_editor_then_vi() {
        assert_eq!(editor_argv(Some("nano"), Some("ed"), None, "/t/f"), ["nano", "/t/f"]);
        assert_eq!(editor_argv(Some(""), Some("ed"), None, "/t/f"), ["ed", "/t/f"]);
        assert_eq!(editor_argv(None, None, None, "/t/f"), ["vi", "/t/f"]);
        assert_eq!(editor_argv(Some("code -w"), None, None, "/t/f"), ["code", "-w", "/t/f"]);
        assert_eq!(
            editor_argv(Some("sed -i 's/a/b/'"), None, Some("/bin/sh"), "/t/f"),
            ["/bin/sh", "-c", "sed -i 's/a/b/' \"/t/f\""]
        );
    }
}
