//! `export --format parquet` end to end: every export kind (`--per fetch`, `--per day`,
//! `--per video`, `--counts`) of a database a real run filled from the fake upstream,
//! read back with the `parquet` crate and with pyarrow and pandas, has the rows and
//! values of the JSON lines export, the line count of the CSV, nulls where the CSV has
//! empty cells, and typed columns: `int64`, `timestamp[us, tz=UTC]`, text ids. Parquet
//! is never written to a terminal.
//!
//! pyarrow and pandas are found through `TRENDSYNC_TEST_PYTHON`, a python that has
//! both (scripts/test installs pinned ones into a virtualenv and exports it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value};

use crate::common::harness::Harness;
use crate::common::upstream::{Billing, FakeUpstream};

/// Every export kind: its name and its flags.
const KINDS: [(&str, &[&str]); 4] = [
    ("fetch", &["--per", "fetch", "--chart", "all"]),
    ("day", &["--per", "day", "--chart", "all"]),
    ("video", &["--per", "video", "--chart", "all"]),
    ("counts", &["--counts"]),
];

/// Columns that always have a value; every other may be null.
const REQUIRED: [&str; 21] = [
    "video_id",
    "trending_date",
    "title",
    "channel_title",
    "comments_disabled",
    "ratings_disabled",
    "video_error_or_removed",
    "description",
    "region",
    "rank",
    "fetched_at",
    "first_seen",
    "last_seen",
    "days_on_chart",
    "fetches",
    "best_rank",
    "best_rank_at",
    "entries",
    "counted_at",
    "source",
    "channel_id",
];

/// The type a column must have in the file.
fn expected_type(column: &str) -> DataType {
    match column {
        "fetched_at" | "publish_time" | "first_seen" | "last_seen" | "best_rank_at"
        | "counted_at" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        "trending_date" => DataType::Date32,
        "views" | "likes" | "dislikes" | "comment_count" | "rank" | "duration_s"
        | "days_on_chart" | "fetches" | "best_rank" | "entries" => DataType::Int64,
        "comments_disabled" | "ratings_disabled" | "video_error_or_removed" => DataType::Boolean,
        "tags" => DataType::List(std::sync::Arc::new(Field::new(
            "item",
            DataType::Utf8,
            false,
        ))),
        _ => DataType::Utf8,
    }
}

/// US with the chart of category 17 and follow-ups: two runs of both charts, then a
/// follow-up that counts the videos that left them (and finds one gone).
pub(crate) fn filled() -> Harness<'static> {
    let regions = |pages: u32| {
        format!(
            "[defaults]\npages = {pages}\n\n[[region]]\ncode = \"US\"\noffset = 0\n\
             categories = [\"17\"]\n\n[follow]\ndays = 7\nevery = \"6h\"\n"
        )
    };
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.regions(&regions(2));
    h.run_to(&["run", "--json"], 0, "complete");
    h.run_to(&["run", "--json"], 0, "complete");
    h.regions(&regions(1));
    let db = rusqlite::Connection::open(h.db_path()).expect("opening");
    db.execute(
        "UPDATE follow_state SET counted_at = counted_at - 7 * 3600
         WHERE video IN (SELECT num FROM videos
                         WHERE id IN ('Tq9wErTyU1o', 'Nb3vC6xZ8aS', 'Jd7kL2mNp4Q'))",
        [],
    )
    .expect("time passes");
    drop(db);
    h.run_to(&["run", "--json"], 0, "complete");
    h
}

/// Writes `export FLAGS --format parquet --output` to `name` and returns its path.
fn export_parquet(h: &Harness<'_>, flags: &[&str], name: &str) -> PathBuf {
    let path = h.scratch.file(name);
    h.bare()
        .arg("export")
        .args(flags)
        .args(["--format", "parquet", "--output"])
        .arg(&path)
        .stdout("")
        .run();
    path
}

fn jsonl(h: &Harness<'_>, flags: &[&str]) -> Vec<Map<String, Value>> {
    let ran = h
        .bare()
        .arg("export")
        .args(flags)
        .args(["--format", "jsonl"])
        .run();
    ran.stdout
        .lines()
        .map(|l| match serde_json::from_str(l) {
            Ok(Value::Object(row)) => row,
            other => panic!("not a JSON object ({other:?}): {l}"),
        })
        .collect()
}

/// The CSV export: its header and its records.
fn csv(h: &Harness<'_>, flags: &[&str]) -> (Vec<String>, Vec<Vec<String>>) {
    let ran = h.bare().arg("export").args(flags).run();
    let mut reader = csv::Reader::from_reader(ran.stdout.as_bytes());
    let header = reader
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_owned)
        .collect();
    let records = reader
        .records()
        .map(|r| r.expect("a CSV record").iter().map(str::to_owned).collect())
        .collect();
    (header, records)
}

/// A Parquet file read with the `parquet` crate: its schema, its row groups' sizes and
/// its rows as JSON (times RFC 3339, days `YYYY-MM-DD`).
struct Read {
    schema: Schema,
    groups: Vec<i64>,
    rows: Vec<Map<String, Value>>,
}

fn read(path: &Path) -> Read {
    let file = std::fs::File::open(path).expect("opening the Parquet file");
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("a Parquet file");
    let schema = builder.schema().as_ref().clone();
    let groups = builder
        .metadata()
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .collect();
    let mut rows = Vec::new();
    for batch in builder.build().expect("a reader") {
        let batch: RecordBatch = batch.expect("a batch");
        for i in 0..batch.num_rows() {
            rows.push(
                batch
                    .schema()
                    .fields()
                    .iter()
                    .zip(batch.columns())
                    .map(|(f, column)| (f.name().clone(), cell(column.as_ref(), i)))
                    .collect(),
            );
        }
    }
    Read {
        schema,
        groups,
        rows,
    }
}

/// Cell `i` of `column` as the JSON lines export writes it.
fn cell(column: &dyn Array, i: usize) -> Value {
    if column.is_null(i) {
        return Value::Null;
    }
    match column.data_type() {
        DataType::Int64 => column.as_primitive::<Int64Type>().value(i).into(),
        DataType::Boolean => column.as_boolean().value(i).into(),
        DataType::Utf8 => column.as_string::<i32>().value(i).into(),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            let us = column.as_primitive::<TimestampMicrosecondType>().value(i);
            jiff::Timestamp::from_microsecond(us)
                .expect("a time")
                .to_string()
                .into()
        }
        DataType::Date32 => {
            let days = column.as_primitive::<Date32Type>().value(i);
            jiff::Timestamp::from_second(i64::from(days) * 86_400)
                .expect("a day")
                .to_zoned(jiff::tz::TimeZone::UTC)
                .date()
                .to_string()
                .into()
        }
        DataType::List(_) => {
            let items = column.as_list::<i32>().value(i);
            (0..items.len()).map(|j| cell(&items, j)).collect()
        }
        other => panic!("a column of type {other}, which no export has"),
    }
}

#[test]
fn parquet_export_of_every_kind_has_the_rows_values_and_types_of_the_other_formats() {
    let h = filled();
    let mut nulls_seen = BTreeSet::new();
    for (kind, flags) in KINDS {
        let path = export_parquet(&h, flags, &format!("{kind}.parquet"));
        let file = read(&path);
        let (header, records) = csv(&h, flags);
        let lines = jsonl(&h, flags);

        // The CSV's columns, in its order, each with its type; only the columns that
        // can be missing may be null.
        let names: Vec<&str> = file
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, header, "{kind}");
        for field in file.schema.fields() {
            let name = field.name().as_str();
            assert_eq!(field.data_type(), &expected_type(name), "{kind}: {name}");
            assert_eq!(
                field.is_nullable(),
                !REQUIRED.contains(&name),
                "{kind}: {name}"
            );
        }

        // The rows and values of the JSON lines, as many as the CSV has.
        assert!(!records.is_empty(), "{kind}: an empty export tests nothing");
        assert_eq!(file.rows.len(), records.len(), "{kind}");
        assert_eq!(
            file.groups.iter().sum::<i64>(),
            i64::try_from(records.len()).expect("rows")
        );
        for (i, (row, line)) in file.rows.iter().zip(&lines).enumerate() {
            assert_eq!(row, line, "{kind}: row {i}");
        }
        assert_eq!(file.rows.len(), lines.len(), "{kind}");

        // Null where the CSV's cell is empty; an integer's empty cell is always null.
        for (row, record) in file.rows.iter().zip(&records) {
            for (column, text) in header.iter().zip(record) {
                let value = &row[column];
                if value.is_null() {
                    assert_eq!(
                        text, "",
                        "{kind}: {column} is null, but the CSV has {text:?}"
                    );
                    nulls_seen.insert(column.clone());
                }
                if expected_type(column) == DataType::Int64 && text.is_empty() {
                    assert!(
                        value.is_null(),
                        "{kind}: {column} is {value}, the CSV empty"
                    );
                }
            }
        }

        // Streamed to a pipe, the same file.
        let piped = h
            .bare()
            .cmd
            .arg("export")
            .args(flags)
            .args(["--format", "parquet"])
            .stdin(Stdio::null())
            .output()
            .expect("running the export");
        assert!(piped.status.success(), "{kind}: {piped:?}");
        assert_eq!(
            piped.stdout,
            std::fs::read(&path).expect("the file"),
            "{kind}: stdout and --output differ"
        );
    }
    // The fixtures have hidden counts and the overall chart: the checks above saw them.
    for column in ["chart", "likes", "comment_count", "dislikes", "tags"] {
        assert!(
            nulls_seen.contains(column),
            "no null {column} in {nulls_seen:?}"
        );
    }
}

/// Runs `t` on a terminal: its exit code and what the terminal received.
fn on_terminal(t: crate::common::Trendsync) -> (Option<i32>, String) {
    let out = t.on_terminal();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn parquet_is_not_written_to_a_terminal_but_to_a_file_from_one() {
    let h = filled();
    // Refused before anything is written, saying what to do instead.
    let (code, shown) = on_terminal(h.bare().args(["export", "--format", "parquet"]));
    assert_eq!(code, Some(2), "{shown}");
    assert!(
        shown.contains("--format parquet writes a binary file, and stdout is a terminal")
            && shown.contains("--output PATH"),
        "{shown}"
    );
    assert!(
        !shown.contains("PAR1"),
        "Parquet reached the terminal: {shown}"
    );

    // With --output, a terminal is no matter.
    let out = h.scratch.file("typed.parquet");
    let (code, shown) = on_terminal(
        h.bare()
            .args(["export", "--counts", "--format", "parquet", "--output"])
            .arg(&out),
    );
    assert_eq!(code, Some(0), "{shown}");
    assert!(!read(&out).rows.is_empty());
}

fn python() -> PathBuf {
    std::env::var_os("TRENDSYNC_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "TRENDSYNC_TEST_PYTHON is not set, and the tests read the Parquet export \
                 with pyarrow and pandas: run scripts/test (it installs pinned ones into \
                 target/analysts-venv and points TRENDSYNC_TEST_PYTHON at its python), or \
                 point TRENDSYNC_TEST_PYTHON at a python that has pyarrow and pandas"
            )
        })
}

#[test]
fn pyarrow_and_pandas_read_every_parquet_export_with_its_types() {
    let python = python();
    let h = filled();
    let files: Vec<(&str, &[&str], PathBuf)> = KINDS
        .iter()
        .map(|(kind, flags)| {
            (
                *kind,
                *flags,
                export_parquet(&h, flags, &format!("{kind}.parquet")),
            )
        })
        .collect();
    let ran = Command::new(&python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/read_parquet.py"
        ))
        .arg(h.db_path())
        .args(files.iter().map(|(_, _, path)| path))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    assert!(
        ran.status.success(),
        "{} could not read the exports: {}",
        python.display(),
        String::from_utf8_lossy(&ran.stderr)
    );
    let found: Value = serde_json::from_slice(&ran.stdout).expect("one JSON object");

    for (kind, flags, path) in &files {
        let seen = &found[path.to_str().expect("a UTF-8 path")];
        let types = &seen["types"];
        let dtypes = &seen["dtypes"];
        let nullable_dtypes = &seen["nullable_dtypes"];
        let lines = jsonl(&h, flags);
        let rows: Vec<Map<String, Value>> = seen["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r.as_object().expect("a row").clone())
            .collect();
        assert_eq!(
            rows, lines,
            "{kind}: pyarrow's rows are not the JSON lines'"
        );

        assert_eq!(types["video_id"], "string", "{kind}");
        assert_eq!(dtypes["video_id"], "object", "{kind}");
        assert_eq!(types["views"], "int64", "{kind}");
        // Counts that can be hidden keep their integers in pandas' nullable types.
        assert_eq!(nullable_dtypes["views"], "Int64", "{kind}");
        assert_eq!(nullable_dtypes["comment_count"], "Int64", "{kind}");
        assert_eq!(seen["nullable"]["video_id"], false, "{kind}");
        assert_eq!(seen["nullable"]["views"], true, "{kind}");
        let times: &[&str] = match *kind {
            "fetch" | "day" => &["fetched_at", "publish_time"],
            "video" => &["first_seen", "last_seen", "best_rank_at"],
            _ => &["counted_at"],
        };
        for time in times {
            assert_eq!(types[time], "timestamp[us, tz=UTC]", "{kind}: {time}");
            assert_eq!(dtypes[time], "datetime64[us, UTC]", "{kind}: {time}");
        }
        let ranks: &[&str] = match *kind {
            "fetch" | "day" => &["rank"],
            "video" => &["best_rank", "days_on_chart", "entries", "fetches"],
            _ => &[],
        };
        for rank in ranks {
            assert_eq!(types[rank], "int64", "{kind}: {rank}");
            assert_eq!(dtypes[rank], "int64", "{kind}: {rank}");
        }
        if *kind == "counts" {
            assert!(seen.get("charts").is_none());
            continue;
        }
        assert_eq!(types["chart"], "string", "{kind}");
        assert_eq!(types["category_id"], "string", "{kind}");
        // The overall chart is None, a category chart its id as text.
        assert_eq!(
            seen["charts"],
            serde_json::json!(["'17'", "None"]),
            "{kind}"
        );
        // Every row of a category chart finds the chart's title, merged with the
        // categories table on the id with no cast.
        assert!(
            seen["rows_of_a_category_chart"].as_u64() > Some(0),
            "{kind}"
        );
        assert_eq!(
            seen["rows_with_a_chart_title"], seen["rows_of_a_category_chart"],
            "{kind}"
        );
    }
}
