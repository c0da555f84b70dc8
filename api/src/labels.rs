//! A label selector's text (`app=x,tier!=db,env in (a,b),!legacy,ready,rank>2`) read as
//! apimachinery's `labels.Parse` reads it — its lexer, its recursive descent, its
//! `NewRequirement` checks and their wording — and matched against labels. apiserver-lite reads
//! a request's `labelSelector` with it; kubectl-lite reads `-l` with it and, as kubectl's
//! builder does, applies it to the objects of files on its side (`apply -f dir -l app=x` acts
//! only on the file's objects the selector matches).

use std::collections::{BTreeMap, BTreeSet};

use crate::validation::names;
use serde_json::Value;

/// Why a selector's text cannot be read, in `labels.Parse`'s words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One requirement, as upstream's `labels.Requirement`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let has = |v: &String| self.values.contains(v);
        match self.op {
            Op::In | Op::Equals | Op::DoubleEquals => value.is_some_and(has),
            Op::NotIn | Op::NotEquals => value.is_none_or(|v| !has(v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::GreaterThan | Op::LessThan => {
                let own = value.and_then(|v| v.parse::<i64>().ok());
                let wanted = match self.values.as_slice() {
                    [one] => one.parse::<i64>().ok(),
                    _ => None,
                };
                match (own, wanted) {
                    (Some(o), Some(w)) if self.op == Op::GreaterThan => o > w,
                    (Some(o), Some(w)) => o < w,
                    _ => false,
                }
            }
        }
    }
}

/// A parsed selector: every requirement must match; none matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Whether it has no requirement (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether these labels satisfy every requirement.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// Whether an object's labels satisfy the selector.
    pub fn matches(&self, object: &Value) -> bool {
        let labels: BTreeMap<String, String> = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.matches_labels(&labels)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The tokens with a fixed spelling (upstream's `string2token`).
fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The text cut into tokens, ending with `End`, as upstream's `Lexer` (a NUL byte ends it).
fn lex(text: &str) -> Vec<(Token, String)> {
    let s = text.as_bytes();
    let mut pos = 0;
    // The byte at `pos`, moving past it; 0 at the end (staying there).
    let read = |pos: &mut usize| -> u8 {
        let c = s.get(*pos).copied().unwrap_or(0);
        if *pos < s.len() {
            *pos += 1;
        }
        c
    };
    let mut out = Vec::new();
    loop {
        let mut c = read(&mut pos);
        while is_whitespace(c) {
            c = read(&mut pos);
        }
        if c == 0 {
            out.push((Token::End, String::new()));
            return out;
        }
        pos -= 1;
        let mut buf = Vec::new();
        if is_special(c) {
            let mut last: Option<(Token, usize)> = None;
            loop {
                let c = read(&mut pos);
                if c == 0 {
                    break;
                }
                if !is_special(c) {
                    pos -= 1;
                    break;
                }
                buf.push(c);
                match keyword(&buf) {
                    Some(t) => last = Some((t, buf.len())),
                    None if last.is_some() => {
                        pos -= 1;
                        break;
                    }
                    None => {}
                }
            }
            out.push(match last {
                Some((t, n)) => (t, String::from_utf8_lossy(&buf[..n]).into_owned()),
                None => (
                    Token::Error,
                    format!("error expected: keyword found '{}'", String::from_utf8_lossy(&buf)),
                ),
            });
        } else {
            loop {
                let c = read(&mut pos);
                if c == 0 {
                    break;
                }
                if is_special(c) || is_whitespace(c) {
                    pos -= 1;
                    break;
                }
                buf.push(c);
            }
            let t = keyword(&buf).unwrap_or(Token::Identifier);
            out.push((t, String::from_utf8_lossy(&buf).into_owned()));
        }
    }
}

/// Whether `in` and `notin` are read as words (values) or as operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    tokens: Vec<(Token, String)>,
    position: usize,
}

type Parsed<T> = Result<T, String>;

impl Parser {
    fn lookahead(&self, context: Context) -> (Token, String) {
        let (t, lit) = self.tokens.get(self.position).cloned().unwrap_or((Token::End, "".into()));
        match t {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, lit),
            _ => (t, lit),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let out = self.lookahead(context);
        self.position += 1;
        out
    }

    fn parse(&mut self) -> Parsed<Vec<Requirement>> {
        let mut requirements = Vec::new();
        loop {
            let (t, lit) = self.lookahead(Context::Values);
            match t {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, lit) = self.consume(Context::Values);
                    match t {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let (t, lit) = self.lookahead(Context::Values);
                            if t != Token::Identifier && t != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{lit}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{lit}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Parsed<Requirement> {
        let (key, op) = self.key_and_inferred_operator()?;
        if let Some(op) = op {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.values()?,
            _ => self.exact_value()?,
        };
        new_requirement(key, op, values.into_iter().collect())
    }

    /// The key, with `!` before it or nothing after it deciding the operator.
    fn key_and_inferred_operator(&mut self) -> Parsed<(String, Option<Op>)> {
        let mut op = None;
        let (mut t, mut lit) = self.consume(Context::Values);
        if t == Token::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (t, lit) = self.consume(Context::Values);
        }
        if t != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        if let Some(e) = invalid_key(&lit, "<nil>") {
            return Err(e);
        }
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::End | Token::Comma) && op.is_none() {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn operator(&mut self) -> Parsed<Op> {
        let (t, lit) = self.consume(Context::KeyAndOperator);
        Ok(match t {
            Token::In => Op::In,
            Token::Equals => Op::Equals,
            Token::DoubleEquals => Op::DoubleEquals,
            Token::GreaterThan => Op::GreaterThan,
            Token::LessThan => Op::LessThan,
            Token::NotIn => Op::NotIn,
            Token::NotEquals => Op::NotEquals,
            _ => return Err(format!("found '{lit}', expected: in, notin, =, ==, !=, gt, lt")),
        })
    }

    /// `(a,b,c)`, empty values allowed.
    fn values(&mut self) -> Parsed<BTreeSet<String>> {
        let (t, lit) = self.consume(Context::Values);
        if t != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (t, lit) = self.lookahead(Context::Values);
        match t {
            Token::Identifier | Token::Comma => {
                let s = self.identifiers()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Parsed<BTreeSet<String>> {
        let mut s = BTreeSet::new();
        loop {
            let (t, lit) = self.consume(Context::Values);
            match t {
                Token::Identifier => {
                    s.insert(lit);
                    let (t, lit) = self.lookahead(Context::Values);
                    match t {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{lit}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if s.is_empty() {
                        s.insert(String::new());
                    }
                    let (t, _) = self.lookahead(Context::Values);
                    if t == Token::ClosedPar {
                        s.insert(String::new());
                        return Ok(s);
                    }
                    if t == Token::Comma {
                        s.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    /// The one value of `=`, `==`, `!=`, `>`, `<` (empty at a comma or the end).
    fn exact_value(&mut self) -> Parsed<BTreeSet<String>> {
        let (t, _) = self.lookahead(Context::Values);
        if matches!(t, Token::End | Token::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (t, lit) = self.consume(Context::Values);
        if t == Token::Identifier {
            Ok(BTreeSet::from([lit]))
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// `field.Invalid(path, value, detail).Error()`.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
}

/// `content.IsLabelKey`: `IsQualifiedName`'s checks, the malformed whole named a label key.
fn invalid_key(key: &str, path: &str) -> Option<String> {
    let errs: Vec<String> = names::qualified_name(key)
        .into_iter()
        .map(|e| match e.strip_prefix("a qualified name ") {
            Some(rest) => format!("a valid label key {rest}"),
            None => e,
        })
        .collect();
    (!errs.is_empty()).then(|| invalid(path, key, &errs.join("; ")))
}

/// Upstream's `NewRequirement` checks that the parser leaves to it: `>`/`<` values are
/// integers, every value a label value; several errors as an aggregate (`[a, b]`).
fn new_requirement(key: String, op: Op, values: Vec<String>) -> Parsed<Requirement> {
    let mut errs: Vec<String> = invalid_key(&key, "key").into_iter().collect();
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
                errs.push(invalid(&format!("values[{i}]"), v, detail));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let bad = names::label_value(v);
        if !bad.is_empty() {
            errs.push(invalid(&format!("values[{i}][{key}]"), v, &bad.join("; ")));
        }
    }
    errs.dedup();
    match errs.len() {
        0 => Ok(Requirement { key, op, values }),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

/// The selector a text names.
pub fn parse(text: &str) -> Result<Selector, SelectorError> {
    let mut p = Parser { tokens: lex(text), position: 0 };
    let mut requirements = p.parse().map_err(SelectorError)?;
    requirements.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Selector(requirements))
}

#[cfg(test)]
mod tests;
