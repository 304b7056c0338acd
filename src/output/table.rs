//! Text that fits the terminal (docs/commands.md, "Text output"): tables whose columns are
//! dropped, least useful first, and whose one long column is cut with `…` until every
//! line fits the width; prose lines wrapped at it. Widths are display columns, so
//! titles in CJK or with emoji line up and are cut where a terminal would show them.
//!
//! The width is `COLUMNS` when it is set (as GNU `ls`, git and clap read it), else
//! the width of the terminal stdout is, else none: piped into a file or `grep`, a line
//! keeps all its text, as `ps` and `systemctl` do. `--json` always has all of it.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The columns stdout's lines may take; `None` for no limit.
pub(crate) fn width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
    {
        return Some(columns);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0))
}

/// How many columns `text` takes on a terminal.
pub fn columns(text: &str) -> usize {
    text.width()
}

/// `text` cut to at most `max` columns, ending in `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> Cow<'_, str> {
    if text.width() <= max {
        return Cow::Borrowed(text);
    }
    if max == 0 {
        return Cow::Owned(String::new());
    }
    // Room for the ellipsis.
    let (mut out, _) = fit(text.chars(), max - 1);
    // No blank before the ellipsis: "for region…".
    out.truncate(out.trim_end().len());
    out.push('…');
    Cow::Owned(out)
}

/// The leading characters of `chars` that fit in `room` columns, and the columns
/// they take.
fn fit(chars: impl Iterator<Item = char>, room: usize) -> (String, usize) {
    let mut out = String::new();
    let mut used = 0;
    for c in chars {
        let w = c.width().unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        out.push(c);
    }
    (out, used)
}

/// `text` cut to at most `max` columns in its middle: its start and, after the `…`,
/// its end, which takes two thirds of the room. For a failure's reason, whose cause
/// comes last ("videos.list for region FR: … the upstream answered 403 forbidden"), so
/// that cutting it to fit never loses why.
pub(crate) fn cut_middle(text: &str, max: usize) -> Cow<'_, str> {
    if text.width() <= max {
        return Cow::Borrowed(text);
    }
    if max < 3 {
        return cut(text, max);
    }
    let room = max - 1;
    // The end first, read backwards, then as much of the start as the rest holds.
    let (tail, used) = fit(text.chars().rev(), room - room / 3);
    let (mut out, _) = fit(text.chars(), room - used);
    // No blank on either side of the ellipsis.
    out.truncate(out.trim_end().len());
    out.push('…');
    let tail: String = tail.chars().rev().collect();
    out.push_str(tail.trim_start());
    Cow::Owned(out)
}

/// Writes a line of prose wrapped at `width` (between words; a word longer than a line
/// is cut), continuation lines indented two spaces more than the first.
pub(crate) fn write_wrapped(
    out: &mut impl Write,
    text: &str,
    width: Option<usize>,
) -> std::io::Result<()> {
    let Some(width) = width.filter(|w| text.width() > *w) else {
        return writeln!(out, "{text}");
    };
    let body = text.trim_start_matches(' ');
    let indent = &text[..text.len() - body.len()];
    let mut line = indent.to_owned();
    let mut empty = true;
    for word in body.split(' ') {
        if !empty && line.width() + 1 + word.width() > width {
            writeln!(out, "{}", cut(&line, width))?;
            line = format!("{indent}  ");
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    writeln!(out, "{}", cut(&line, width))
}

/// A writer that wraps each line written through it at a width (see
/// [`write_wrapped`]): the prose around a table fits as the table does.
pub(crate) struct Wrapped<W: Write> {
    inner: W,
    width: Option<usize>,
    /// The start of a line not ended yet.
    pending: Vec<u8>,
}

impl<W: Write> Wrapped<W> {
    pub(crate) fn new(inner: W, width: Option<usize>) -> Wrapped<W> {
        Wrapped {
            inner,
            width,
            pending: Vec::new(),
        }
    }
}

impl<W: Write> Write for Wrapped<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..end]);
            write_wrapped(&mut self.inner, &text, self.width)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            let text = String::from_utf8_lossy(&line);
            write!(
                self.inner,
                "{}",
                cut(&text, self.width.unwrap_or(usize::MAX))
            )?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for Wrapped<W> {
    fn drop(&mut self) {
        // A failed write here has nowhere to be reported; the lines that matter end in
        // a newline and were written (or failed) in `write`.
        let _ = self.flush();
    }
}

/// The fewest columns the one column allowed to shrink keeps before another column is
/// dropped to make room for it: a quarter of the width, within these bounds.
const FLEX_MIN: (usize, usize) = (8, 24);

/// One column of a [`Table`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    pub(crate) header: &'static str,
    /// Numbers are right-aligned.
    pub(crate) right: bool,
    /// 0: always shown. Otherwise, when the line is too wide, the column with the
    /// highest rank is dropped first.
    pub(crate) drop_rank: u8,
    /// The column cut with `…` to fit (reasons, titles); at most one per table.
    pub(crate) flex: bool,
    /// A flex column cut in its middle rather than at its end ([`cut_middle`]): a
    /// reason, whose cause comes last.
    pub(crate) keeps_end: bool,
}

impl Column {
    pub(crate) const fn text(header: &'static str, drop_rank: u8) -> Column {
        Column {
            header,
            right: false,
            drop_rank,
            flex: false,
            keeps_end: false,
        }
    }

    pub(crate) const fn number(header: &'static str, drop_rank: u8) -> Column {
        Column {
            right: true,
            ..Column::text(header, drop_rank)
        }
    }

    /// The column that is cut to fit; never dropped.
    pub(crate) const fn flex(header: &'static str) -> Column {
        Column {
            flex: true,
            ..Column::text(header, 0)
        }
    }

    /// The flex column of a failure's reason: cut in its middle, so that its cause,
    /// which comes last, stays.
    pub(crate) const fn reason(header: &'static str) -> Column {
        Column {
            keeps_end: true,
            ..Column::flex(header)
        }
    }
}

enum Row {
    Cells(Vec<String>),
    /// A line of prose between rows (where a plan would stop), wrapped to the width.
    Note(String),
}

/// A table of text laid out to a width.
pub(crate) struct Table {
    columns: Vec<Column>,
    rows: Vec<Row>,
}

impl Table {
    pub(crate) fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    /// Adds a row, one cell per column.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(Row::Cells(cells));
    }

    pub(crate) fn note(&mut self, text: String) {
        self.rows.push(Row::Note(text));
    }

    /// Each column's width, `None` for one dropped to fit `width`.
    fn layout(&self, width: Option<usize>) -> Vec<Option<usize>> {
        let natural: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.rows
                    .iter()
                    .filter_map(|r| match r {
                        Row::Cells(cells) => cells.get(i).map(|s| s.width()),
                        Row::Note(_) => None,
                    })
                    .fold(c.header.width(), usize::max)
            })
            .collect();
        let mut shown: Vec<Option<usize>> = natural.iter().copied().map(Some).collect();
        let Some(width) = width else {
            return shown;
        };
        let flex = self.columns.iter().position(|c| c.flex);
        // Everything but the flex column, with one space between columns.
        let fixed = |shown: &[Option<usize>]| {
            let visible = shown.iter().flatten().count();
            shown
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != flex)
                .filter_map(|(_, w)| *w)
                .sum::<usize>()
                + visible.saturating_sub(1)
        };
        loop {
            let least = (width / 4).clamp(FLEX_MIN.0, FLEX_MIN.1);
            let flex_needs = flex.map_or(0, |f| natural[f].min(least));
            if fixed(&shown) + flex_needs <= width {
                break;
            }
            let next = (0..self.columns.len())
                .filter(|i| shown[*i].is_some() && self.columns[*i].drop_rank > 0)
                .max_by_key(|i| self.columns[*i].drop_rank);
            match next {
                Some(i) => shown[i] = None,
                None => break,
            }
        }
        if let Some(f) = flex {
            shown[f] = Some(natural[f].min(width.saturating_sub(fixed(&shown)).max(1)));
        }
        shown
    }

    /// Writes the header and the rows, no line wider than `width` (when given).
    pub(crate) fn write(&self, out: &mut impl Write, width: Option<usize>) -> std::io::Result<()> {
        let layout = self.layout(width);
        let headers: Vec<String> = self.columns.iter().map(|c| c.header.to_owned()).collect();
        self.write_cells(out, &headers, &layout, width)?;
        for row in &self.rows {
            match row {
                Row::Cells(cells) => self.write_cells(out, cells, &layout, width)?,
                Row::Note(text) => write_wrapped(out, text, width)?,
            }
        }
        Ok(())
    }

    fn write_cells(
        &self,
        out: &mut impl Write,
        cells: &[String],
        layout: &[Option<usize>],
        width: Option<usize>,
    ) -> std::io::Result<()> {
        let last = layout.iter().rposition(Option::is_some);
        let mut line = String::new();
        for (i, (column, w)) in self.columns.iter().zip(layout).enumerate() {
            let Some(w) = *w else { continue };
            if !line.is_empty() {
                line.push(' ');
            }
            let cell = cells.get(i).map_or("", String::as_str);
            let text = if column.keeps_end {
                cut_middle(cell, w)
            } else {
                cut(cell, w)
            };
            let pad = " ".repeat(w.saturating_sub(text.width()));
            if column.right {
                line.push_str(&pad);
                line.push_str(&text);
            } else {
                line.push_str(&text);
                if Some(i) != last {
                    line.push_str(&pad);
                }
            }
        }
        // An empty last cell leaves no padding behind.
        let line = line.trim_end();
        // A table that cannot fit even with every column it may drop gone is cut.
        match width {
            Some(w) => writeln!(out, "{}", cut(line, w)),
            None => writeln!(out, "{line}"),
        }
    }
}

#[cfg(test)]
mod tests;
