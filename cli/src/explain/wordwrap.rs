//! Word wrapping as kubectl's explain wraps descriptions (`github.com/mitchellh/go-wordwrap`
//! v1.0.1, which its `wrap` template function calls): lines break at white space only, a word
//! longer than the limit overflows its line, the input's own newlines are kept, and widths are
//! counted in characters. A no-break space is not a place to break.

const NO_BREAK_SPACE: char = '\u{a0}';

/// Characters held back until it is known where they go, and how many.
#[derive(Default)]
struct Run {
    text: String,
    chars: usize,
}

impl Run {
    fn push(&mut self, c: char) {
        self.text.push(c);
        self.chars += 1;
    }

    fn is_empty(&self) -> bool {
        self.chars == 0
    }

    /// Writes the run to `out` and empties it.
    fn write_to(&mut self, out: &mut String) {
        out.push_str(&self.text);
        self.discard();
    }

    fn discard(&mut self) {
        self.text.clear();
        self.chars = 0;
    }
}

/// At a line's end (the input's newline, or its end): the pending word with the spaces before
/// it, or trailing spaces alone if they fit.
fn end_line(out: &mut String, current: usize, space: &mut Run, word: &mut Run, limit: usize) {
    if !word.is_empty() || current + space.chars <= limit {
        space.write_to(out);
    }
    space.discard();
    word.write_to(out);
}

/// `text` wrapped at `limit` characters a line.
pub fn wrap(text: &str, limit: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / limit.max(1));
    // Characters on the current line; the word and the spaces before it, not yet written.
    let mut current = 0usize;
    let (mut word, mut space) = (Run::default(), Run::default());
    for c in text.chars() {
        if c == '\n' {
            end_line(&mut out, current, &mut space, &mut word, limit);
            out.push('\n');
            current = 0;
        } else if c.is_whitespace() && c != NO_BREAK_SPACE {
            if space.is_empty() || !word.is_empty() {
                current += space.chars + word.chars;
                space.write_to(&mut out);
                word.write_to(&mut out);
            }
            space.push(c);
        } else {
            word.push(c);
            if current + space.chars + word.chars > limit && word.chars < limit {
                out.push('\n');
                current = 0;
                space.discard();
            }
        }
    }
    end_line(&mut out, current, &mut space, &mut word, limit);
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn lines_break_at_the_last_space_that_fits() {
        assert_eq!(wrap("aaa bbb ccc", 7), "aaa bbb\nccc");
        assert_eq!(wrap("aaa bbb ccc", 8), "aaa bbb\nccc");
        assert_eq!(wrap("aaa bbb ccc", 11), "aaa bbb ccc");
    }

    #[test]
    fn a_word_longer_than_the_limit_overflows_its_own_line() {
        assert_eq!(
            wrap("see https://example.com/a/long/path here", 10),
            "see\nhttps://example.com/a/long/path\nhere"
        );
    }

    #[test]
    fn newlines_are_kept_and_restart_the_count() {
        assert_eq!(wrap("aaa\nbbb ccc ddd\n", 7), "aaa\nbbb ccc\nddd\n");
        assert_eq!(wrap("a\n\nb", 3), "a\n\nb");
    }

    #[test]
    fn widths_count_characters_and_no_break_spaces_join_words() {
        assert_eq!(wrap("ééé ééé", 7), "ééé ééé");
        assert_eq!(wrap("aa\u{a0}bb cc", 5), "aa\u{a0}bb\ncc");
    }
}
