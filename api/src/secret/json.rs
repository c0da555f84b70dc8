//! Whether bytes unmarshal into Go's `map[string]interface{}`, and if not, why, in the words of
//! Go's `encoding/json` (its scanner's syntax errors, then the type error), which is what
//! upstream's registry-secret validation answers with.

/// Go's `maxNestingDepth`.
const MAX_DEPTH: usize = 10_000;

/// The error `json.Unmarshal(bytes, &map[string]interface{}{})` returns, if any.
pub fn unmarshal_map_error(bytes: &[u8]) -> Option<String> {
    if let Err(e) = check_valid(bytes) {
        return Some(e);
    }
    let first = bytes.iter().find(|c| !is_space(**c)).copied().unwrap_or(b'n');
    let value = match first {
        b'{' | b'n' => return None,
        b'[' => "array",
        b'"' => "string",
        b't' | b'f' => "bool",
        _ => "number",
    };
    Some(format!("json: cannot unmarshal {value} into Go value of type map[string]interface {{}}"))
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`: how a byte is shown in a syntax error.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        0x07 => r"'\a'".to_string(),
        0x08 => r"'\b'".to_string(),
        0x0c => r"'\f'".to_string(),
        b'\n' => r"'\n'".to_string(),
        b'\r' => r"'\r'".to_string(),
        b'\t' => r"'\t'".to_string(),
        0x0b => r"'\v'".to_string(),
        c if c < 0x20 || c == 0x7f => format!(r"'\x{c:02x}'"),
        c if (0x80..=0xa0).contains(&c) || c == 0xad => format!(r"'\u00{c:02x}'"),
        c => format!("'{}'", char::from(c)),
    }
}

#[derive(Debug, Clone, Copy)]
enum Frame {
    Object,
    Array,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

const EOF: &str = "unexpected end of JSON input";

impl Scanner<'_> {
    fn skip_space(&mut self) {
        while self.b.get(self.i).is_some_and(|c| is_space(*c)) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// The next byte, or the end-of-input error.
    fn next(&mut self) -> Result<u8, String> {
        let c = self.peek().ok_or_else(|| EOF.to_string())?;
        self.i += 1;
        Ok(c)
    }

    /// The next byte inside a token; at the end of the input, a space, as Go's scanner steps
    /// its state with one at the end (so an unfinished number or literal is an invalid `' '`).
    fn next_in_token(&mut self) -> u8 {
        let c = self.peek().unwrap_or(b' ');
        self.i += 1;
        c
    }

    fn invalid(c: u8, context: &str) -> String {
        format!("invalid character {} {context}", quote_char(c))
    }

    /// The rest of a string literal, after its opening quote.
    fn string(&mut self) -> Result<(), String> {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next_in_token() {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let h = self.next_in_token();
                            if !h.is_ascii_hexdigit() {
                                return Err(Self::invalid(
                                    h,
                                    "in \\u hexadecimal character escape",
                                ));
                            }
                        }
                    }
                    c => return Err(Self::invalid(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(Self::invalid(c, "in string literal")),
                _ => {}
            }
        }
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    /// The rest of a number whose first byte (`-` or a digit) was read. A number may end the
    /// input.
    fn number(&mut self, first: u8) -> Result<(), String> {
        let lead = if first == b'-' {
            match self.next_in_token() {
                c @ b'0'..=b'9' => c,
                c => return Err(Self::invalid(c, "in numeric literal")),
            }
        } else {
            first
        };
        if lead != b'0' {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            match self.next_in_token() {
                b'0'..=b'9' => self.digits(),
                c => return Err(Self::invalid(c, "after decimal point in numeric literal")),
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            let mut c = self.next_in_token();
            if matches!(c, b'+' | b'-') {
                c = self.next_in_token();
            }
            if !c.is_ascii_digit() {
                return Err(Self::invalid(c, "in exponent of numeric literal"));
            }
            self.digits();
        }
        Ok(())
    }

    /// The rest of `true`, `false` or `null` after its first byte.
    fn literal(&mut self, word: &str) -> Result<(), String> {
        for expected in word.bytes().skip(1) {
            let c = self.next_in_token();
            if c != expected {
                let context = format!("in literal {word} (expecting {})", quote_char(expected));
                return Err(Self::invalid(c, &context));
            }
        }
        Ok(())
    }

    /// An object key and its colon, after the key's opening quote was expected.
    fn key(&mut self) -> Result<(), String> {
        self.skip_space();
        match self.next()? {
            b'"' => self.string()?,
            c => return Err(Self::invalid(c, "looking for beginning of object key string")),
        }
        self.skip_space();
        match self.next()? {
            b':' => Ok(()),
            c => Err(Self::invalid(c, "after object key")),
        }
    }
}

/// Go's `checkValid`: the first syntax error of `bytes` as one JSON value.
fn check_valid(bytes: &[u8]) -> Result<(), String> {
    let mut s = Scanner { b: bytes, i: 0 };
    let mut stack: Vec<Frame> = Vec::new();
    // true: a value is expected next; false: one just ended.
    let mut begin = true;
    loop {
        if begin {
            s.skip_space();
            match s.next()? {
                b'{' => {
                    s.skip_space();
                    if s.peek() == Some(b'}') {
                        s.i += 1;
                        begin = false;
                    } else {
                        stack.push(Frame::Object);
                        s.key()?;
                    }
                }
                b'[' => {
                    s.skip_space();
                    if s.peek() == Some(b']') {
                        s.i += 1;
                        begin = false;
                    } else {
                        stack.push(Frame::Array);
                    }
                }
                b'"' => {
                    s.string()?;
                    begin = false;
                }
                c @ (b'-' | b'0'..=b'9') => {
                    s.number(c)?;
                    begin = false;
                }
                b't' => {
                    s.literal("true")?;
                    begin = false;
                }
                b'f' => {
                    s.literal("false")?;
                    begin = false;
                }
                b'n' => {
                    s.literal("null")?;
                    begin = false;
                }
                c => return Err(Scanner::invalid(c, "looking for beginning of value")),
            }
            if stack.len() > MAX_DEPTH {
                return Err("exceeded max depth".to_string());
            }
            continue;
        }
        s.skip_space();
        match stack.last() {
            None => {
                return match s.peek() {
                    None => Ok(()),
                    Some(c) => Err(Scanner::invalid(c, "after top-level value")),
                };
            }
            Some(Frame::Object) => match s.next()? {
                b',' => {
                    s.key()?;
                    begin = true;
                }
                b'}' => {
                    stack.pop();
                }
                c => return Err(Scanner::invalid(c, "after object key:value pair")),
            },
            Some(Frame::Array) => match s.next()? {
                b',' => begin = true,
                b']' => {
                    stack.pop();
                }
                c => return Err(Scanner::invalid(c, "after array element")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        unmarshal_map_error(s.as_bytes()).unwrap_or_default()
    }

    #[test]
    fn objects_and_null_unmarshal_into_a_map() {
        for ok in [
            "{}",
            " {\"auths\": {\"r.io\": {\"auth\": \"YTpi\"}}} ",
            "null",
            "{\"a\": [1, -2.5e+3, true, false, null, \"\\u00e9\\n\"]}",
        ] {
            assert_eq!(unmarshal_map_error(ok.as_bytes()), None, "{ok}");
        }
    }

    #[test]
    fn syntax_errors_read_as_gos() {
        assert_eq!(err(""), "unexpected end of JSON input");
        assert_eq!(err("{\"a\": "), "unexpected end of JSON input");
        assert_eq!(err("not json"), "invalid character 'o' in literal null (expecting 'u')");
        assert_eq!(err("xyz"), "invalid character 'x' looking for beginning of value");
        assert_eq!(
            err("{a: 1}"),
            "invalid character 'a' looking for beginning of object key string"
        );
        assert_eq!(err("{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(err("{\"a\": 1 \"b\"}"), "invalid character '\"' after object key:value pair");
        assert_eq!(err("[1 2]"), "invalid character '2' after array element");
        assert_eq!(err("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(err("01"), "invalid character '1' after top-level value");
        assert_eq!(err("-x"), "invalid character 'x' in numeric literal");
        assert_eq!(err("1.x"), "invalid character 'x' after decimal point in numeric literal");
        assert_eq!(err("1e+"), "invalid character ' ' in exponent of numeric literal");
        assert_eq!(err("1."), "invalid character ' ' after decimal point in numeric literal");
        assert_eq!(err("tr"), "invalid character ' ' in literal true (expecting 'u')");
        assert_eq!(err("\"abc"), "unexpected end of JSON input");
        assert_eq!(err("[1"), "unexpected end of JSON input");
        assert_eq!(err("1ex"), "invalid character 'x' in exponent of numeric literal");
        assert_eq!(err("\"a\\q\""), "invalid character 'q' in string escape code");
        assert_eq!(err("\"\\u12g4\""), "invalid character 'g' in \\u hexadecimal character escape");
        assert_eq!(err("\"a\nb\""), "invalid character '\\n' in string literal");
        assert_eq!(
            err("{'a': 1}"),
            "invalid character '\\'' looking for beginning of object key string"
        );
        assert_eq!(err(&"[".repeat(10_001)), "exceeded max depth");
    }

    #[test]
    fn other_values_do_not_fit_a_map() {
        let msg = |v: &str| {
            format!("json: cannot unmarshal {v} into Go value of type map[string]interface {{}}")
        };
        assert_eq!(err("[]"), msg("array"));
        assert_eq!(err("\"x\""), msg("string"));
        assert_eq!(err("12"), msg("number"));
        assert_eq!(err("true"), msg("bool"));
    }
}
