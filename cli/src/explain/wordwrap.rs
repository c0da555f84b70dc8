//! Word wrapping as kubectl's explain wraps descriptions (`github.com/mitchellh/go-wordwrap`
//! v1.0.1, which its `wrap` template function calls): lines break at white space only, a word
//! longer than the limit overflows its line, the input's own newlines are kept, and widths are
//! counted in characters. A no-break space is not a place to break.

const NO_BREAK_SPACE: char = '\u{a0}';

/// `text` wrapped at `limit` characters a line.
pub fn wrap(text: &str, limit: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / limit.max(1));
    // Characters on the current line; the word and the spaces before it, not yet written.
    let mut current = 0usize;
    let (mut word, mut word_len) = (String::new(), 0usize);
    let (mut space, mut space_len) = (String::new(), 0usize);
    for c in text.chars() {
        if c == '\n' {
            if word.is_empty() {
                if current + space_len <= limit {
                    out.push_str(&space);
                }
            } else {
                out.push_str(&space);
                out.push_str(&word);
                word.clear();
                word_len = 0;
            }
            space.clear();
            space_len = 0;
            out.push('\n');
            current = 0;
        } else if c.is_whitespace() && c != NO_BREAK_SPACE {
            if space.is_empty() || !word.is_empty() {
                current += space_len + word_len;
                out.push_str(&space);
                out.push_str(&word);
                space.clear();
                space_len = 0;
                word.clear();
                word_len = 0;
            }
            space.push(c);
            space_len += 1;
        } else {
            word.push(c);
            word_len += 1;
            if current + space_len + word_len > limit && word_len < limit {
                out.push('\n');
                current = 0;
                space.clear();
                space_len = 0;
            }
        }
    }
    if word.is_empty() {
        if current + space_len <= limit {
            out.push_str(&space);
        }
    } else {
        out.push_str(&space);
        out.push_str(&word);
    }
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
