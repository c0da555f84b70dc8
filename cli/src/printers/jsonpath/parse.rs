//! The template grammar of client-go's `util/jsonpath`: text outside `{…}` kept as is; inside,
//! `.field` (a `\` escapes the next character, so `app\.kubernetes\.io/name` is one key),
//! `['key']`, `[n]`, `[start:end:step]`, `[*]`, `[a,b]` unions, `..` recursive descent, `*`,
//! filters `[?(@.x == "y")]`, quoted strings with Go's escapes, numbers, `true`/`false`, and
//! the identifiers `range` and `end`. The parser is a hand-written scanner over the input, as
//! upstream's, and its errors are upstream's wording.

/// One node of a parsed template.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Text printed as is (outside braces, or a quoted string inside).
    Text(String),
    /// One `{…}` action: its nodes applied left to right.
    List(Vec<Node>),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<Node>,
        op: String,
        right: Vec<Node>,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    /// `range` or `end` (anything else fails when executed, as upstream's).
    Identifier(String),
}

/// One of `[start:end:step]`'s numbers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Param {
    pub value: i64,
    pub known: bool,
    /// `[n]`: the end is `n + 1`, derived from the start.
    pub derived: bool,
}

const EOF: Option<char> = None;

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    width: usize,
    root: Vec<Node>,
}

/// Parses a template into its top-level nodes: texts and actions (`Node::List`).
pub fn parse(text: &str) -> Result<Vec<Node>, String> {
    let mut p = Parser { input: text, pos: 0, start: 0, width: 0, root: Vec::new() };
    p.parse_text()?;
    Ok(p.root)
}

/// Parses `{text}` and returns the nodes of its one action (upstream's `parseAction`).
fn parse_action(text: &str) -> Result<Vec<Node>, String> {
    let root = parse(&format!("{{{text}}}"))?;
    match root.into_iter().next() {
        Some(Node::List(nodes)) => Ok(nodes),
        _ => Ok(Vec::new()),
    }
}

impl Parser<'_> {
    fn consume(&mut self) -> String {
        let v = self.input[self.start..self.pos].to_string();
        self.start = self.pos;
        v
    }

    fn next(&mut self) -> Option<char> {
        match self.input[self.pos..].chars().next() {
            None => {
                self.width = 0;
                EOF
            }
            Some(c) => {
                self.width = c.len_utf8();
                self.pos += self.width;
                Some(c)
            }
        }
    }

    fn peek(&mut self) -> Option<char> {
        let r = self.next();
        self.backup();
        r
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    /// The byte two before the current position (the one before the last rune read).
    fn escaped(&self) -> bool {
        self.pos >= 2 && self.input.as_bytes()[self.pos - 2] == b'\\'
    }

    fn parse_text(&mut self) -> Result<(), String> {
        loop {
            if self.rest().starts_with('{') {
                if self.pos > self.start {
                    let t = self.consume();
                    self.root.push(Node::Text(t));
                }
                self.pos += 1;
                self.consume();
                let mut cur = Vec::new();
                self.parse_inside_action(&mut cur)?;
                self.root.push(Node::List(cur));
                continue;
            }
            if self.next() == EOF {
                break;
            }
        }
        if self.pos > self.start {
            let t = self.consume();
            self.root.push(Node::Text(t));
        }
        Ok(())
    }

    /// Reads one action's nodes into `cur` up to and including its `}`.
    fn parse_inside_action(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            if self.rest().starts_with('}') {
                self.pos += 1;
                self.consume();
                return Ok(());
            }
            if self.rest().starts_with("[?(") {
                self.parse_filter(cur)?;
                continue;
            }
            if self.rest().starts_with("..") {
                self.parse_recursive(cur)?;
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return Err("unclosed action".into()),
                Some(' ' | '@' | '$') => {
                    self.consume();
                }
                Some('[') => self.parse_array(cur)?,
                Some(q @ ('"' | '\'')) => self.parse_quote(cur, q)?,
                Some('.') => self.parse_field(cur),
                Some(c) if c == '+' || c == '-' || c.is_numeric() => {
                    self.backup();
                    self.parse_number(cur)?;
                }
                Some(c) if is_alphanumeric(c) => {
                    self.backup();
                    self.parse_identifier(cur);
                }
                Some(c) => {
                    return Err(format!("unrecognized character in action: {}", go_unicode(c)));
                }
            }
        }
    }

    fn parse_identifier(&mut self, cur: &mut Vec<Node>) {
        loop {
            let r = self.next();
            if is_terminator(r) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        cur.push(match value.as_str() {
            "true" => Node::Bool(true),
            "false" => Node::Bool(false),
            _ => Node::Identifier(value),
        });
    }

    fn parse_recursive(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if cur.last() == Some(&Node::Recursive) {
            return Err("invalid multiple recursive descent".into());
        }
        self.pos += 2;
        self.consume();
        cur.push(Node::Recursive);
        if self.peek().is_some_and(is_alphanumeric) {
            self.parse_field(cur);
        }
        Ok(())
    }

    fn parse_number(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        loop {
            match self.next() {
                Some(c) if c == '.' || c.is_numeric() => {}
                _ => {
                    self.backup();
                    break;
                }
            }
        }
        let value = self.consume();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
        } else if let Some(f) = parse_go_float(&value) {
            cur.push(Node::Float(f));
        } else {
            return Err(format!("cannot parse number {value}"));
        }
        Ok(())
    }

    fn parse_array(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated array".into()),
                Some(']') => break,
                _ => {}
            }
        }
        let text = self.consume();
        let mut text = &text[1..text.len() - 1];
        if text == "*" {
            text = ":";
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            let mut union = Vec::new();
            for part in parts {
                union.push(parse_action(&format!("[{}]", part.trim_matches(' ')))?);
            }
            cur.push(Node::Union(union));
            return Ok(());
        }
        if let Some(key) = dict_key(text) {
            cur.extend(parse_action(&format!(".{key}"))?);
            return Ok(());
        }
        let groups = slice_groups(text).ok_or_else(|| format!("invalid array index {text}"))?;
        let mut params = [Param::default(); 3];
        for (i, group) in groups.iter().enumerate() {
            if group.is_empty() {
                if i == 1 {
                    params[1] = Param { value: params[0].value + 1, known: true, derived: true };
                }
                continue;
            }
            let digits = if i > 0 { &group[1..] } else { group };
            if i > 0 && digits.is_empty() {
                continue;
            }
            let value = digits
                .parse::<i64>()
                .map_err(|_| format!("array index {digits} is not a number"))?;
            params[i] = Param { value, known: true, derived: false };
        }
        cur.push(Node::Array(params));
        Ok(())
    }

    fn parse_filter(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        self.pos += 3;
        self.consume();
        let (mut begin, mut end) = (false, false);
        let mut pair = '"';
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated filter".into()),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if !self.escaped() && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                _ => {}
            }
        }
        if self.next() != Some(']') {
            return Err("unclosed array expect ]".into());
        }
        let text = self.consume();
        let text = &text[..text.len() - 2];
        match split_comparison(text) {
            None => cur.push(Node::Filter {
                left: parse_action(text)?,
                op: "exists".into(),
                right: Vec::new(),
            }),
            Some((l, op, r)) => cur.push(Node::Filter {
                left: parse_action(l)?,
                op: op.to_string(),
                right: parse_action(r)?,
            }),
        }
        Ok(())
    }

    fn parse_quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated quoted string".into()),
                Some(c) if c == end && !self.escaped() => break,
                _ => {}
            }
        }
        let value = self.consume();
        let s = unquote(&value).map_err(|e| format!("unquote string {value} error {e}"))?;
        cur.push(Node::Text(s));
        Ok(())
    }

    fn parse_field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            match self.next() {
                Some('\\') => {
                    self.next();
                }
                r if is_terminator(r) => {
                    self.backup();
                    break;
                }
                _ => {}
            }
        }
        let value = self.consume();
        cur.push(if value == "*" { Node::Wildcard } else { Node::Field(value.replace('\\', "")) });
    }
}

fn is_terminator(r: Option<char>) -> bool {
    match r {
        None => true,
        Some(c) => {
            matches!(c, ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}')
        }
    }
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// Go's `%#U`: `U+0023 '#'`.
fn go_unicode(c: char) -> String {
    if c.is_control() { format!("U+{:04X}", c as u32) } else { format!("U+{:04X} '{c}'", c as u32) }
}

/// Go's `strconv.ParseFloat` for what the number scanner collects (digits, dots, a sign).
fn parse_go_float(s: &str) -> Option<f64> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body.is_empty() || body == "." || body.matches('.').count() > 1 {
        return None;
    }
    if !body.chars().all(|c| c == '.' || c.is_ascii_digit()) {
        return None;
    }
    s.parse::<f64>().ok()
}

/// `'key'` → `key` (upstream's `^'([^']*)'$`).
fn dict_key(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    (!inner.contains('\'')).then_some(inner)
}

/// The three groups of `^(-?\d*)(:-?\d*)?(:-?\d*)?$`, absent ones empty.
fn slice_groups(text: &str) -> Option<[&str; 3]> {
    let number = |s: &str| {
        let d = s.strip_prefix('-').unwrap_or(s);
        d.bytes().all(|b| b.is_ascii_digit())
    };
    let mut groups = ["", "", ""];
    let mut rest = text;
    for (i, group) in groups.iter_mut().enumerate() {
        if i > 0 {
            if rest.is_empty() {
                break;
            }
            if !rest.starts_with(':') {
                return None;
            }
        }
        let skip = usize::from(i > 0);
        let end = rest[skip..].find(':').map_or(rest.len(), |e| e + skip);
        if !number(&rest[skip..end]) {
            return None;
        }
        *group = &rest[..end];
        rest = &rest[end..];
    }
    rest.is_empty().then_some(groups)
}

/// Upstream's `^([^!<>=]+)([!<>=]+)(.+?)$`: left, operator, right.
fn split_comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let op_start = text.find(is_op)?;
    if op_start == 0 {
        return None;
    }
    let mut op_end = text[op_start..].find(|c| !is_op(c)).map_or(text.len(), |e| e + op_start);
    if op_end == text.len() {
        // The right side needs a character: the operator gives its last one back.
        if op_end - op_start < 2 {
            return None;
        }
        op_end -= 1;
    }
    let right = &text[op_end..];
    if right.contains('\n') {
        return None;
    }
    Some((&text[..op_start], &text[op_start..op_end], right))
}

/// Go's `strconv.Unquote`, extended to single-quoted strings of any length.
fn unquote(s: &str) -> Result<String, &'static str> {
    const SYNTAX: &str = "invalid syntax";
    let quote = s.chars().next().ok_or(SYNTAX)?;
    if s.len() < 2 || !s.ends_with(quote) || !matches!(quote, '"' | '\'') {
        return Err(SYNTAX);
    }
    let body = &s[1..s.len() - 1];
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == quote {
            return Err(SYNTAX);
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next().ok_or(SYNTAX)?;
        let mut hex = |n: usize| -> Result<u32, &'static str> {
            let mut v = 0;
            for _ in 0..n {
                v = v * 16 + chars.next().and_then(|c| c.to_digit(16)).ok_or(SYNTAX)?;
            }
            Ok(v)
        };
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' | '"' if e == quote => out.push(e),
            'x' => out.push(char::from_u32(hex(2)?).ok_or(SYNTAX)?),
            'u' => out.push(char::from_u32(hex(4)?).ok_or(SYNTAX)?),
            'U' => out.push(char::from_u32(hex(8)?).ok_or(SYNTAX)?),
            '0'..='7' => {
                let mut v = e.to_digit(8).ok_or(SYNTAX)?;
                for _ in 0..2 {
                    v = v * 8 + chars.next().and_then(|c| c.to_digit(8)).ok_or(SYNTAX)?;
                }
                if v > 255 {
                    return Err(SYNTAX);
                }
                out.push(char::from_u32(v).ok_or(SYNTAX)?);
            }
            _ => return Err(SYNTAX),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(t: &str) -> Vec<Node> {
        match parse(t).unwrap().remove(0) {
            Node::List(n) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn text_and_actions_alternate_at_the_top() {
        let nodes = parse("a {.b} c").unwrap();
        assert_eq!(
            nodes,
            [
                Node::Text("a ".into()),
                Node::List(vec![Node::Field("b".into())]),
                Node::Text(" c".into())
            ]
        );
    }

    #[test]
    fn escaped_dots_keep_a_key_whole() {
        assert_eq!(
            action(r"{.metadata.labels.app\.kubernetes\.io/name}"),
            [
                Node::Field("metadata".into()),
                Node::Field("labels".into()),
                Node::Field("app.kubernetes.io/name".into())
            ]
        );
    }

    #[test]
    fn indexes_slices_and_wildcards_become_array_params() {
        let known = |value| Param { value, known: true, derived: false };
        assert_eq!(
            action("{[-1]}"),
            [Node::Array([
                known(-1),
                Param { value: 0, known: true, derived: true },
                Param::default()
            ])]
        );
        assert_eq!(action("{[1:3:2]}"), [Node::Array([known(1), known(3), known(2)])]);
        assert_eq!(action("{[*]}"), [Node::Array([Param::default(); 3])]);
        assert_eq!(action("{['a']}"), [Node::Field("a".into())], "a quoted key is a field");
    }

    #[test]
    fn filters_split_at_the_operator() {
        assert_eq!(
            action(r#"{[?(@.name=="x")]}"#),
            [Node::Filter {
                left: vec![Node::Field("name".into())],
                op: "==".into(),
                right: vec![Node::Text("x".into())]
            }]
        );
        assert_eq!(
            action("{[?(@.a)]}"),
            [Node::Filter {
                left: vec![Node::Field("a".into())],
                op: "exists".into(),
                right: vec![]
            }]
        );
        assert_eq!(
            action("{[?(@.n>=2.5)]}")[0],
            Node::Filter {
                left: vec![Node::Field("n".into())],
                op: ">=".into(),
                right: vec![Node::Float(2.5)]
            }
        );
    }

    #[test]
    fn range_end_literals_unions_and_recursion_parse() {
        assert_eq!(
            action("{range .items[*]}"),
            [
                Node::Identifier("range".into()),
                Node::Field("items".into()),
                Node::Array([Param::default(); 3])
            ]
        );
        assert_eq!(action(r#"{"\n"}"#), [Node::Text("\n".into())]);
        assert_eq!(action(r"{'\t'}"), [Node::Text("\t".into())]);
        assert_eq!(action(r#"{"\x41\101\u00e9"}"#), [Node::Text("AAé".into())]);
        assert_eq!(action("{..name}"), [Node::Recursive, Node::Field("name".into())]);
        assert_eq!(action("{@}"), []);
        assert!(matches!(&action("{[0,1]}")[0], Node::Union(u) if u.len() == 2));
    }

    #[test]
    fn malformed_templates_are_refused_in_upstreams_words() {
        for (t, e) in [
            ("{.x", "unclosed action"),
            ("{.x}{.y", "unclosed action"),
            ("{.a[}", "unterminated array"),
            ("{.a[x]}", "invalid array index x"),
            ("{.a[a:b]}", "invalid array index a:b"),
            ("{.a[-]}", "array index - is not a number"),
            (r#"{.a[?(@.n=="b"]}"#, "unterminated filter"),
            (r#"{"abc}"#, "unterminated quoted string"),
            ("{#}", "unrecognized character in action: U+0023 '#'"),
            ("{....x}", "invalid multiple recursive descent"),
            ("{1.2.3}", "cannot parse number 1.2.3"),
            (r#"{"\q"}"#, r#"unquote string "\q" error invalid syntax"#),
        ] {
            assert_eq!(parse(t).unwrap_err(), e, "{t}");
        }
    }
}
