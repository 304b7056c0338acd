//! Parquet for analysts: a table of typed columns written through the Apache Arrow
//! project's crates, one row at a time. Rows gather in a batch of bounded size, and
//! batches in a row group of bounded size that is encoded and written out when full,
//! so the writer holds at most one batch and one row group's encoded pages however many
//! rows pass through it.
//!
//! Times are `timestamp[us, UTC]`, days `date32`, counts and ranks `int64`, ids and
//! text UTF-8; a column that may be null says so in the schema, and one that may not is
//! declared required, so a reader sees which cells can be missing.

use std::io::Write;
use std::sync::Arc;

use ::parquet::arrow::ArrowWriter;
use ::parquet::basic::Compression;
use ::parquet::errors::ParquetError;
use ::parquet::file::properties::WriterProperties;
use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Int64Builder, ListBuilder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

/// Writing a Parquet table failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    /// Encoding the file.
    #[error("writing Parquet")]
    Parquet(#[source] ParquetError),
    /// Writing the file: the I/O error is the source.
    #[error("writing Parquet")]
    Write(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A batch did not match the schema.
    #[error("building a Parquet batch")]
    Arrow(#[from] ArrowError),
    /// A row gave a column a value of another type, or no value where one is required.
    #[error("column {column} of the Parquet table cannot hold {cell}")]
    Cell {
        column: &'static str,
        cell: &'static str,
    },
    /// A row with more or fewer cells than the table has columns.
    #[error("a row of {cells} cells for a Parquet table of {columns} columns")]
    Width { cells: usize, columns: usize },
}

impl From<ParquetError> for TableError {
    fn from(e: ParquetError) -> TableError {
        match e {
            // Parquet says the error it was handed in its own words and returns it as
            // its source too: only that is kept, so that it is said once.
            ParquetError::External(cause) => TableError::Write(cause),
            e => TableError::Parquet(e),
        }
    }
}

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `int64`.
    Int,
    /// An instant: `timestamp[us, tz=UTC]`.
    Time,
    /// A UTC day: `date32`.
    Day,
    /// UTF-8 text.
    Text,
    /// `bool`.
    Bool,
    /// A list of UTF-8 texts, none of them null.
    TextList,
}

impl Kind {
    fn data_type(self) -> DataType {
        match self {
            Kind::Int => DataType::Int64,
            Kind::Time => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            Kind::Day => DataType::Date32,
            Kind::Text => DataType::Utf8,
            Kind::Bool => DataType::Boolean,
            Kind::TextList => DataType::List(list_item()),
        }
    }
}

const UTC: &str = "UTC";

/// The items of a [`Kind::TextList`]: text, never null.
fn list_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Utf8, false))
}

/// One column of a table: its name, what it holds, whether a cell may be null, and
/// what it means (the file carries it in the field's metadata, under
/// [`DESCRIPTION_KEY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) nullable: bool,
    pub(crate) description: &'static str,
}

/// The key of a field's description in its Arrow metadata, as pyarrow's
/// `field.metadata[b"description"]` reads it.
pub(crate) const DESCRIPTION_KEY: &str = "description";

impl Column {
    /// A column whose every cell has a value.
    pub(crate) const fn required(name: &'static str, kind: Kind) -> Column {
        Column {
            name,
            kind,
            nullable: false,
            description: "",
        }
    }

    /// A column whose cells may be null.
    pub(crate) const fn optional(name: &'static str, kind: Kind) -> Column {
        Column {
            name,
            kind,
            nullable: true,
            description: "",
        }
    }

    /// The column, saying what it means.
    pub(crate) const fn about(self, description: &'static str) -> Column {
        Column {
            description,
            ..self
        }
    }

    /// Whether the column can hold `cell`.
    fn holds(&self, cell: &Cell<'_>) -> bool {
        match cell {
            Cell::Null => self.nullable,
            Cell::Int(_) => self.kind == Kind::Int,
            Cell::Time(_) => self.kind == Kind::Time,
            Cell::Day(_) => self.kind == Kind::Day,
            Cell::Text(_) => self.kind == Kind::Text,
            Cell::Bool(_) => self.kind == Kind::Bool,
            Cell::TextList(_) => self.kind == Kind::TextList,
        }
    }
}

/// The Arrow schema of `columns`, as the file declares it.
pub(crate) fn schema(columns: &[Column]) -> Schema {
    Schema::new(
        columns
            .iter()
            .map(|c| {
                let field = Field::new(c.name, c.kind.data_type(), c.nullable);
                if c.description.is_empty() {
                    field
                } else {
                    field.with_metadata(std::collections::HashMap::from([(
                        DESCRIPTION_KEY.to_owned(),
                        c.description.to_owned(),
                    )]))
                }
            })
            .collect::<Vec<_>>(),
    )
}

/// One cell of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Cell<'a> {
    Null,
    Int(i64),
    /// An instant, for a [`Kind::Time`] column.
    Time(jiff::Timestamp),
    /// The UTC day of an instant, for a [`Kind::Day`] column.
    Day(jiff::Timestamp),
    Text(&'a str),
    Bool(bool),
    TextList(&'a [String]),
}

impl Cell<'_> {
    /// An optional integer: null when `None`.
    pub(crate) fn int(n: Option<i64>) -> Cell<'static> {
        n.map_or(Cell::Null, Cell::Int)
    }

    /// What the cell holds, for an error.
    fn what(&self) -> &'static str {
        match self {
            Cell::Null => "a null",
            Cell::Int(_) => "an integer",
            Cell::Time(_) => "a time",
            Cell::Day(_) => "a day",
            Cell::Text(_) => "text",
            Cell::Bool(_) => "a boolean",
            Cell::TextList(_) => "a list of texts",
        }
    }
}

impl<'a> From<Option<&'a str>> for Cell<'a> {
    fn from(text: Option<&'a str>) -> Cell<'a> {
        text.map_or(Cell::Null, Cell::Text)
    }
}

/// How much a [`Table`] holds before it writes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Rows gathered before they become a batch handed to the encoder.
    pub(crate) batch_rows: usize,
    /// Bytes of text gathered before the batch is handed on, whatever its rows: long
    /// descriptions make a batch large long before it has many rows.
    pub(crate) batch_text_bytes: usize,
    /// Rows of a row group; the last one may have fewer.
    pub(crate) group_rows: usize,
    /// The encoded size at which a row group is written out, whatever its rows.
    pub(crate) group_bytes: usize,
}

impl Limits {
    /// For exports: batches of 8192 rows or 16 MiB of text, row groups of 128Ki rows or
    /// 64 MiB encoded, whichever comes first. Large enough for readers to skip and scan
    /// well, small enough that a year exports in a few hundred MiB of memory at most.
    pub(crate) const EXPORT: Limits = Limits {
        batch_rows: 8192,
        batch_text_bytes: 16 << 20,
        group_rows: 128 * 1024,
        group_bytes: 64 << 20,
    };
}

/// The builder of one column's cells in the current batch.
enum Builder {
    Int(Int64Builder),
    Time(TimestampMicrosecondBuilder),
    Day(Date32Builder),
    Text(StringBuilder),
    Bool(BooleanBuilder),
    TextList(ListBuilder<StringBuilder>),
}

impl Builder {
    fn new(kind: Kind) -> Builder {
        match kind {
            Kind::Int => Builder::Int(Int64Builder::new()),
            Kind::Time => Builder::Time(TimestampMicrosecondBuilder::new().with_timezone(UTC)),
            Kind::Day => Builder::Day(Date32Builder::new()),
            Kind::Text => Builder::Text(StringBuilder::new()),
            Kind::Bool => Builder::Bool(BooleanBuilder::new()),
            Kind::TextList => {
                Builder::TextList(ListBuilder::new(StringBuilder::new()).with_field(list_item()))
            }
        }
    }

    /// Appends `cell` and returns the bytes of text it added; `None` when the column
    /// cannot hold it (which [`Column::holds`] tells before).
    fn append(&mut self, cell: Cell<'_>) -> Option<usize> {
        match (self, cell) {
            (Builder::Int(b), Cell::Null) => b.append_null(),
            (Builder::Time(b), Cell::Null) => b.append_null(),
            (Builder::Day(b), Cell::Null) => b.append_null(),
            (Builder::Text(b), Cell::Null) => b.append_null(),
            (Builder::Bool(b), Cell::Null) => b.append_null(),
            (Builder::TextList(b), Cell::Null) => b.append(false),
            (Builder::Int(b), Cell::Int(n)) => b.append_value(n),
            (Builder::Time(b), Cell::Time(t)) => b.append_value(t.as_microsecond()),
            (Builder::Day(b), Cell::Day(t)) => b.append_value(utc_day(t)),
            (Builder::Text(b), Cell::Text(s)) => {
                b.append_value(s);
                return Some(s.len());
            }
            (Builder::Bool(b), Cell::Bool(v)) => b.append_value(v),
            (Builder::TextList(b), Cell::TextList(items)) => {
                for item in items {
                    b.values().append_value(item);
                }
                b.append(true);
                return Some(items.iter().map(String::len).sum());
            }
            _ => return None,
        }
        Some(0)
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
            Builder::Day(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::TextList(b) => Arc::new(b.finish()),
        }
    }
}

/// Days from 1970-01-01 to the UTC day of `t` (every instant jiff holds fits).
fn utc_day(t: jiff::Timestamp) -> i32 {
    i32::try_from(t.as_second().div_euclid(86_400)).unwrap_or(i32::MAX)
}

/// A Parquet file being written, row by row.
pub(crate) struct Table<W: Write + Send> {
    writer: ArrowWriter<W>,
    schema: SchemaRef,
    columns: &'static [Column],
    builders: Vec<Builder>,
    limits: Limits,
    /// Rows and text bytes in the builders, not yet handed to the encoder.
    rows: usize,
    text_bytes: usize,
}

impl<W: Write + Send> Table<W> {
    /// Starts a file of `columns` on `out`, Snappy-compressed (what pandas, Polars,
    /// DuckDB and Spark all read, and quick to write).
    pub(crate) fn new(
        out: W,
        columns: &'static [Column],
        limits: Limits,
    ) -> Result<Self, TableError> {
        let schema = Arc::new(schema(columns));
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(limits.group_rows.max(1)))
            .set_max_row_group_bytes(Some(limits.group_bytes.max(1)))
            .build();
        let writer = ArrowWriter::try_new(out, Arc::clone(&schema), Some(props))?;
        Ok(Table {
            writer,
            schema,
            columns,
            builders: columns.iter().map(|c| Builder::new(c.kind)).collect(),
            limits,
            rows: 0,
            text_bytes: 0,
        })
    }

    /// Adds one row, a cell per column in the columns' order.
    pub(crate) fn row(&mut self, cells: &[Cell<'_>]) -> Result<(), TableError> {
        if cells.len() != self.columns.len() {
            return Err(TableError::Width {
                cells: cells.len(),
                columns: self.columns.len(),
            });
        }
        // A row is checked whole before any of it is added, so that a refused row
        // leaves every column as long as the others.
        if let Some((column, cell)) = self
            .columns
            .iter()
            .zip(cells)
            .find(|(column, cell)| !column.holds(cell))
        {
            return Err(TableError::Cell {
                column: column.name,
                cell: cell.what(),
            });
        }
        for ((builder, column), cell) in self.builders.iter_mut().zip(self.columns).zip(cells) {
            self.text_bytes += builder.append(*cell).ok_or(TableError::Cell {
                column: column.name,
                cell: cell.what(),
            })?;
        }
        self.rows += 1;
        if self.rows >= self.limits.batch_rows || self.text_bytes >= self.limits.batch_text_bytes {
            self.hand_on()?;
        }
        Ok(())
    }

    /// Hands the gathered rows to the encoder as one batch, which writes out each row
    /// group as it fills.
    fn hand_on(&mut self) -> Result<(), TableError> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), arrays)?;
        self.rows = 0;
        self.text_bytes = 0;
        self.writer.write(&batch)?;
        Ok(())
    }

    /// Writes the last rows and the footer, and hands `out` back. A table dropped
    /// without this is not a Parquet file (it has no footer).
    pub(crate) fn finish(mut self) -> Result<W, TableError> {
        self.hand_on()?;
        // Writes the last row group and the footer (once: `finish` before it would
        // write a second footer).
        Ok(self.writer.into_inner()?)
    }
}

#[cfg(test)]
mod tests;
