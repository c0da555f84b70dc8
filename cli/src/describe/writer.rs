//! kubectl's `PrefixWriter`: text written at an indentation level (two spaces a level), with
//! terminal escapes made harmless, into a tab writer that aligns `\t`-separated cells — or,
//! [`PrefixWriter::raw`], into plain text with the tabs left in (kubectl's `rollout history
//! --revision` writes its pod template to a bare buffer).

use super::tabwriter::TabWriter;

pub const LEVEL_0: usize = 0;
pub const LEVEL_1: usize = 1;
pub const LEVEL_2: usize = 2;
pub const LEVEL_3: usize = 3;

#[derive(Debug)]
enum Sink {
    Aligned(TabWriter),
    Raw(String),
}

impl Sink {
    fn write(&mut self, s: &str) {
        match self {
            Sink::Aligned(t) => t.write(s),
            Sink::Raw(out) => out.push_str(s),
        }
    }
}

#[derive(Debug)]
pub struct PrefixWriter {
    tab: Sink,
    /// Levels added to every write (kubectl's nested prefix writer).
    indent: usize,
}

impl Default for PrefixWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl PrefixWriter {
    pub fn new() -> Self {
        PrefixWriter { tab: Sink::Aligned(TabWriter::new()), indent: 0 }
    }

    /// A writer whose tabs are written as they are, not aligned.
    pub fn raw() -> Self {
        PrefixWriter { tab: Sink::Raw(String::new()), indent: 0 }
    }

    /// `text` after `level` indentations.
    pub fn write(&mut self, level: usize, text: &str) {
        let mut s = "  ".repeat(level + self.indent);
        s.push_str(text);
        self.tab.write(&escape(&s));
    }

    /// A whole line, unindented (kubectl's `WriteLine`, used after a title).
    pub fn line(&mut self, text: &str) {
        if self.indent > 0 {
            let s = format!("{}{text}\n", "  ".repeat(self.indent));
            self.tab.write(&escape(&s));
        } else {
            self.tab.write(&escape(&format!("{text}\n")));
        }
    }

    /// Aligns what was written so far on its own (kubectl flushes before the events table).
    pub fn flush(&mut self) {
        if let Sink::Aligned(t) = &mut self.tab {
            t.flush();
        }
    }

    /// Runs `f` with every write `levels` deeper.
    pub fn nested(&mut self, levels: usize, f: impl FnOnce(&mut PrefixWriter)) {
        self.indent += levels;
        f(self);
        self.indent -= levels;
    }

    pub fn finish(self) -> String {
        match self.tab {
            Sink::Aligned(t) => t.finish(),
            Sink::Raw(out) => out,
        }
    }
}

/// cli-runtime's `EscapeTerminal`: ESC and CR shown, not obeyed.
fn escape(s: &str) -> String {
    if !s.contains(['\x1b', '\r']) {
        return s.to_string();
    }
    s.replace('\x1b', "^[").replace('\r', "\\r")
}

#[cfg(test)]
mod raw_tests {
    use super::*;

    #[test]
    fn a_raw_writer_keeps_its_tabs_where_an_aligned_one_pads() {
        let mut raw = PrefixWriter::raw();
        raw.write(LEVEL_1, "Image:\tbusybox\n");
        assert_eq!(raw.finish(), "  Image:\tbusybox\n");
    }
}
