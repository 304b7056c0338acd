use std::fs::File;

use ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};

use super::*;

const COLUMNS: &[Column] = &[
    Column::required("id", Kind::Text),
    Column::required("at", Kind::Time),
    Column::required("day", Kind::Day),
    Column::optional("views", Kind::Int),
    Column::optional("chart", Kind::Text),
    Column::required("hidden", Kind::Bool),
    Column::optional("tags", Kind::TextList),
];

fn at(secs: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(secs).expect("a time")
}

/// Row `i` of the test table: every other one has nulls.
fn write_row<W: Write + Send>(table: &mut Table<W>, i: i64) -> Result<(), TableError> {
    let id = format!("v{i}");
    let tags = vec![format!("t{i}"), "x".to_owned()];
    let odd = i % 2 == 1;
    table.row(&[
        Cell::Text(&id),
        Cell::Time(at(1_764_000_000 + i)),
        Cell::Day(at(1_764_000_000 + i * 86_400)),
        Cell::int((!odd).then_some(i * 10)),
        Cell::from((!odd).then_some("17")),
        Cell::Bool(odd),
        if odd {
            Cell::Null
        } else {
            Cell::TextList(&tags)
        },
    ])
}

/// A file of `rows` rows written with `limits`.
fn write(rows: i64, limits: Limits) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().expect("a temporary file");
    let mut table =
        Table::new(file.reopen().expect("reopening"), COLUMNS, limits).expect("a table");
    for i in 0..rows {
        write_row(&mut table, i).expect("a row");
    }
    table
        .finish()
        .expect("finishing")
        .sync_all()
        .expect("syncing");
    file
}

fn read(file: &tempfile::NamedTempFile) -> (Vec<usize>, Vec<RecordBatch>) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(file.path()).expect("open"))
        .expect("a Parquet file");
    let groups = builder
        .metadata()
        .row_groups()
        .iter()
        .map(|g| usize::try_from(g.num_rows()).expect("rows"))
        .collect();
    let batches = builder
        .build()
        .expect("a reader")
        .collect::<Result<Vec<_>, _>>()
        .expect("the batches");
    (groups, batches)
}

const SMALL: Limits = Limits {
    batch_rows: 3,
    batch_text_bytes: 1 << 20,
    group_rows: 5,
    group_bytes: 1 << 30,
};

#[test]
fn rows_stream_into_row_groups_of_the_size_given() {
    let file = write(12, SMALL);
    let (groups, batches) = read(&file);
    assert_eq!(groups, [5, 5, 2]);
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 12);
}

#[test]
fn a_row_group_is_written_out_when_full_not_held_to_the_end() {
    let file = tempfile::NamedTempFile::new().expect("a temporary file");
    let mut table = Table::new(file.reopen().expect("reopening"), COLUMNS, SMALL).expect("a table");
    for i in 0..13 {
        write_row(&mut table, i).expect("a row");
    }
    // Two groups of 5 written out; three rows wait, in the batch or the
    // encoder: never more than one group's worth is held.
    assert_eq!(table.writer.flushed_row_groups().len(), 2);
    assert!(table.rows + table.writer.in_progress_rows() <= 5);
    table.finish().expect("finishing");
}

#[test]
fn long_text_hands_a_batch_on_before_it_has_its_rows() {
    let limits = Limits {
        batch_rows: 1000,
        batch_text_bytes: 8,
        ..SMALL
    };
    let mut table = Table::new(Vec::new(), COLUMNS, limits).expect("a table");
    write_row(&mut table, 0).expect("a row");
    // "v0", "17", "t0" and "x": 7 bytes, still gathered.
    assert_eq!(table.rows, 1);
    write_row(&mut table, 2).expect("a row");
    assert_eq!(table.rows, 0);
    assert_eq!(table.writer.in_progress_rows(), 2);
}

#[test]
fn the_schema_keeps_types_and_which_columns_may_be_null() {
    let file = write(4, SMALL);
    let (_, batches) = read(&file);
    let schema = batches[0].schema();
    let field = |name: &str| schema.field_with_name(name).expect("a field").clone();
    assert_eq!(
        field("at").data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert_eq!(field("day").data_type(), &DataType::Date32);
    assert_eq!(field("views").data_type(), &DataType::Int64);
    assert_eq!(field("id").data_type(), &DataType::Utf8);
    assert_eq!(field("hidden").data_type(), &DataType::Boolean);
    assert_eq!(field("tags").data_type(), &DataType::List(list_item()));
    for (name, nullable) in [
        ("id", false),
        ("at", false),
        ("day", false),
        ("views", true),
        ("chart", true),
        ("hidden", false),
        ("tags", true),
    ] {
        assert_eq!(field(name).is_nullable(), nullable, "{name}");
    }

    let batch = &batches[0];
    let column = |name: &str| batch.column(schema.index_of(name).expect("a column"));
    let times = column("at").as_primitive::<TimestampMicrosecondType>();
    assert_eq!(times.value(1), (1_764_000_000 + 1) * 1_000_000);
    let days = column("day").as_primitive::<Date32Type>();
    assert_eq!(days.value(0), 20_416);
    assert_eq!(days.value(1), 20_417);
    let views = column("views").as_primitive::<Int64Type>();
    assert_eq!((views.value(2), views.is_null(1)), (20, true));
    let chart = column("chart").as_string::<i32>();
    assert_eq!((chart.value(0), chart.is_null(1)), ("17", true));
    let tags = column("tags").as_list::<i32>();
    assert!(tags.is_null(1));
    let first = tags.value(0);
    let first = first.as_string::<i32>();
    assert_eq!(
        (0..first.len()).map(|i| first.value(i)).collect::<Vec<_>>(),
        ["t0", "x"]
    );
}

#[test]
fn a_row_that_does_not_fit_the_columns_is_refused_and_adds_nothing() {
    let mut table = Table::new(Vec::new(), COLUMNS, SMALL).expect("a table");
    let null_id = [
        Cell::Null,
        Cell::Time(at(0)),
        Cell::Day(at(0)),
        Cell::Null,
        Cell::Null,
        Cell::Bool(false),
        Cell::Null,
    ];
    assert!(matches!(
        table.row(&null_id),
        Err(TableError::Cell { column: "id", .. })
    ));
    let text_for_a_time = [
        Cell::Text("v"),
        Cell::Text("2026-11-25"),
        Cell::Day(at(0)),
        Cell::Null,
        Cell::Null,
        Cell::Bool(false),
        Cell::Null,
    ];
    assert!(matches!(
        table.row(&text_for_a_time),
        Err(TableError::Cell { column: "at", .. })
    ));
    assert!(matches!(
        table.row(&[Cell::Text("v")]),
        Err(TableError::Width {
            cells: 1,
            columns: 7
        })
    ));
    // A refused row left nothing behind: the next one makes a consistent batch.
    assert_eq!(table.rows, 0);
    write_row(&mut table, 0).expect("a row");
    table.finish().expect("finishing");
}

#[test]
fn a_table_of_no_rows_is_a_file_with_its_schema() {
    let file = write(0, SMALL);
    let (groups, batches) = read(&file);
    assert!(groups.is_empty());
    assert!(batches.is_empty());
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(file.path()).expect("open"))
        .expect("a Parquet file");
    assert_eq!(reader.schema().as_ref(), &schema(COLUMNS));
}
