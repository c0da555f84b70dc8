//! Whether a label selector parses as apimachinery's `labels.Parse` reads it (kubectl checks
//! `--pod-selector` before it sends anything): requirements separated by commas — `key`,
//! `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`,
//! `key>1`, `key<1` — with keys qualified names and values label values.

use api::validation::names::{label_value, qualified_name};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Symbol(&'static str),
}

fn lex(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let symbol = match c {
            c if c.is_whitespace() => continue,
            '(' => "(",
            ')' => ")",
            ',' => ",",
            '>' => ">",
            '<' => "<",
            '!' if chars.next_if_eq(&'=').is_some() => "!=",
            '!' => "!",
            '=' if chars.next_if_eq(&'=').is_some() => "==",
            '=' => "=",
            c => {
                let mut word = c.to_string();
                while let Some(n) = chars.next_if(|n| !n.is_whitespace() && !"()!,=<>".contains(*n))
                {
                    word.push(n);
                }
                out.push(Token::Word(word));
                continue;
            }
        };
        out.push(Token::Symbol(symbol));
    }
    out
}

fn key(t: Option<&Token>) -> bool {
    matches!(t, Some(Token::Word(k)) if k != "in" && k != "notin" && qualified_name(k).is_empty())
}

fn value(v: &str) -> bool {
    label_value(v).is_empty()
}

/// Whether `s` is a valid label selector (the empty one selects everything).
pub fn valid(s: &str) -> bool {
    let tokens = lex(s);
    if tokens.is_empty() {
        return true;
    }
    let mut i = 0;
    loop {
        let ok = match tokens.get(i) {
            Some(Token::Symbol("!")) => {
                i += 2;
                key(tokens.get(i - 1))
            }
            t if key(t) => {
                i += 1;
                requirement_rest(&tokens, &mut i)
            }
            _ => false,
        };
        if !ok {
            return false;
        }
        match tokens.get(i) {
            None => return true,
            Some(Token::Symbol(",")) => i += 1,
            Some(_) => return false,
        }
    }
}

/// After a key: nothing (exists), an operator and its value, or a set.
fn requirement_rest(tokens: &[Token], i: &mut usize) -> bool {
    let next = |i: usize| tokens.get(i);
    match next(*i) {
        None | Some(Token::Symbol(",")) => true,
        Some(Token::Symbol("=" | "==" | "!=")) => {
            *i += 1;
            match next(*i) {
                None | Some(Token::Symbol(",")) => true,
                Some(Token::Word(v)) => {
                    *i += 1;
                    value(v)
                }
                Some(_) => false,
            }
        }
        Some(Token::Symbol(">" | "<")) => {
            *i += 1;
            let number = matches!(next(*i), Some(Token::Word(v)) if v.parse::<i64>().is_ok());
            *i += 1;
            number
        }
        Some(Token::Word(op)) if op == "in" || op == "notin" => {
            *i += 1;
            if next(*i) != Some(&Token::Symbol("(")) {
                return false;
            }
            *i += 1;
            let mut values = 0;
            loop {
                match next(*i) {
                    Some(Token::Word(v)) if value(v) => values += 1,
                    _ => return false,
                }
                *i += 1;
                match next(*i) {
                    Some(Token::Symbol(",")) => *i += 1,
                    Some(Token::Symbol(")")) => {
                        *i += 1;
                        return values > 0;
                    }
                    _ => return false,
                }
            }
        }
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_kubectl_accepts_are_valid() {
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
            "replicas>1,replicas<5",
        ] {
            assert!(valid(s), "{s:?}");
        }
    }

    #[test]
    fn selectors_kubectl_refuses_are_invalid() {
        for s in [
            "app=web,",
            ",app=web",
            "app=we b",
            "app=-web",
            "in=x",
            "env in ()",
            "env in (a",
            "env in a",
            "replicas>x",
            "bad key=x",
            "a/b/c=x",
            "app=web)",
            "!",
        ] {
            assert!(!valid(s), "{s:?}");
        }
    }
}
