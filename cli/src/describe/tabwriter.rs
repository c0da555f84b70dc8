//! Go's `text/tabwriter` as kubectl's describers configure it (`minwidth 0, tabwidth 8,
//! padding 2, padchar ' ', flags 0`): tab-terminated cells aligned in column blocks, a block
//! being consecutive lines that have a cell in that column; a line without tabs, or a flush,
//! ends every block. The last cell of a line is never padded.

/// A tab-terminated cell, or a line's last (unterminated) cell.
#[derive(Debug, Default, Clone)]
struct Cell {
    text: String,
}

impl Cell {
    fn width(&self) -> usize {
        self.text.chars().count()
    }
}

#[derive(Debug, Default)]
pub struct TabWriter {
    out: String,
    /// Buffered lines; the last one is the line being written.
    lines: Vec<Vec<Cell>>,
    cell: String,
    widths: Vec<usize>,
}

const PADDING: usize = 2;

impl TabWriter {
    pub fn new() -> Self {
        TabWriter { lines: vec![Vec::new()], ..TabWriter::default() }
    }

    pub fn write(&mut self, text: &str) {
        for ch in text.chars() {
            match ch {
                '\t' => {
                    self.terminate_cell();
                }
                '\n' => {
                    let cells = self.terminate_cell();
                    self.lines.push(Vec::new());
                    if cells == 1 {
                        self.flush();
                    }
                }
                c => self.cell.push(c),
            }
        }
    }

    /// Adds the current cell to the current line; the line's cell count.
    fn terminate_cell(&mut self) -> usize {
        let text = std::mem::take(&mut self.cell);
        let line = self.lines.last_mut().expect("a line is always open");
        line.push(Cell { text });
        line.len()
    }

    /// Formats and writes out everything buffered.
    pub fn flush(&mut self) {
        if !self.cell.is_empty() {
            self.terminate_cell();
        }
        let n = self.lines.len();
        self.format(0, n);
        self.lines = vec![Vec::new()];
        self.widths.clear();
    }

    /// Everything written, formatted.
    pub fn finish(mut self) -> String {
        self.flush();
        self.out
    }

    fn format(&mut self, line0: usize, line1: usize) {
        let column = self.widths.len();
        let mut line0 = line0;
        let mut this = line0;
        while this < line1 {
            if column + 1 >= self.lines[this].len() {
                this += 1;
                continue;
            }
            // A cell in this column: lines before it are printed, a block begins.
            self.write_lines(line0, this);
            line0 = this;
            let mut width = 0;
            while this < line1 {
                let line = &self.lines[this];
                if column + 1 >= line.len() {
                    break;
                }
                width = width.max(line[column].width() + PADDING);
                this += 1;
            }
            self.widths.push(width);
            self.format(line0, this);
            self.widths.pop();
            line0 = this;
            // Go's loop steps past the line that ended the block (it has no cell here).
            this += 1;
        }
        self.write_lines(line0, line1);
    }

    fn write_lines(&mut self, line0: usize, line1: usize) {
        for i in line0..line1 {
            let line = &self.lines[i];
            for (j, c) in line.iter().enumerate() {
                self.out.push_str(&c.text);
                if j < self.widths.len() {
                    for _ in c.width()..self.widths[j] {
                        self.out.push(' ');
                    }
                }
            }
            if i + 1 < self.lines.len() {
                self.out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tab(text: &str) -> String {
        let mut w = TabWriter::new();
        w.write(text);
        w.finish()
    }

    #[test]
    fn cells_align_in_blocks_of_consecutive_lines() {
        assert_eq!(
            tab("Name:\tnginx\nNamespace:\tdefault\n"),
            "Name:       nginx\nNamespace:  default\n"
        );
    }

    #[test]
    fn a_line_without_tabs_ends_the_block() {
        assert_eq!(tab("a:\t1\nplain\nlonger:\t2\n"), "a:  1\nplain\nlonger:  2\n");
    }

    #[test]
    fn inner_columns_form_blocks_of_their_own() {
        let got = tab("  Type\tStatus\n  Ready \tTrue \n  PodScheduled \tFalse \n");
        assert_eq!(
            got,
            "  Type           Status\n  Ready          True \n  PodScheduled   False \n"
        );
        let got = tab("x\ty\tz\nlong\tq\nx\tyy\tz\n");
        assert_eq!(got, "x     y  z\nlong  q\nx     yy  z\n");
    }

    #[test]
    fn an_empty_cell_still_pads() {
        assert_eq!(tab("a\t\tb\nccc\td\te\n"), "a       b\nccc  d  e\n");
    }
}
