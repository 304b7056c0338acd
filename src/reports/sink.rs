//! The sink (`--sink`, docs/commands.md): the run's finished slots shipped from the
//! outbox in the database to object storage, one Parquet object per chart fetch, in
//! `export`'s columns and types, so that the objects of every host are one dataset.
//!
//! Each object is named by its slot alone
//! (`<prefix>/date=YYYY-MM-DD/region=XX/<slot start>-chart-<chart>.parquet`) and written
//! create-only (object_store's `PutMode::Create`: S3's `If-None-Match: *`, a link that
//! refuses to replace on a local file system). An object already there is a slot
//! someone shipped before (a retry of this host, or another host's fetch of the same
//! slot): the slot counts as shipped, and the sink never holds a second copy of it.
//!
//! Shipping is at least once: a slot leaves the outbox only once each of its objects is
//! on the sink. A sink that fails is logged in one line and tried again by the next
//! run; the rows stay in the database until then (`prune` keeps them).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, RetryConfig};

use crate::clock::Clock;
use crate::dataset::{PLACES_TABLE, write_place};
use crate::mask::mask_url;
use crate::output::parquet::{Limits, Table};
use crate::sqlite::Db;
use crate::store::{QueuedSlot, SlotFetch, Store};

/// Where the sink is, as `--sink` gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SinkUrl {
    /// `s3://bucket/prefix`: any S3-compatible store.
    S3 { bucket: String, prefix: String },
    /// `file:///absolute/path`: a directory (created when missing).
    File { root: std::path::PathBuf },
}

/// The forms `--sink` takes, for its usage errors.
pub(crate) const FORMS: &str = "s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH";

impl SinkUrl {
    /// Reads `raw`; the error says what is wrong without repeating `raw` (which may
    /// hold a credential): the caller names it masked.
    pub(crate) fn parse(raw: &str) -> Result<SinkUrl, String> {
        if let Some(rest) = raw.strip_prefix("s3://") {
            // No bucket name and no sensible prefix has an `@`; a password may hold a
            // `/`, so the whole URL is looked at.
            if rest.contains('@') {
                return Err("credentials do not go in the URL: the sink reads them from the AWS environment variables (docs/commands.md)".into());
            }
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() || bucket.contains(['?', '#', ':']) {
                return Err(format!("no bucket name; expected {FORMS}"));
            }
            let prefix = prefix.trim_matches('/');
            let plain_segment = |p: &str| !(p.is_empty() || p == "." || p == "..");
            if prefix.contains(['?', '#'])
                || (!prefix.is_empty() && !prefix.split('/').all(plain_segment))
            {
                return Err(format!("the prefix is no plain path; expected {FORMS}"));
            }
            return Ok(SinkUrl::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        if let Some(rest) = raw.strip_prefix("file://") {
            let root = std::path::Path::new(rest);
            if !rest.starts_with('/') || !root.is_absolute() {
                return Err(format!("the path is not absolute; expected {FORMS}"));
            }
            if root
                .components()
                .any(|c| c == std::path::Component::ParentDir)
            {
                return Err(format!("the path has `..` in it; expected {FORMS}"));
            }
            return Ok(SinkUrl::File {
                root: root.to_path_buf(),
            });
        }
        Err(format!("not a sink URL; expected {FORMS}"))
    }

    /// The sink as logs name it: no credential ever (an S3 URL holds none; the mask
    /// is the rule every URL the program prints follows).
    pub(crate) fn shown(&self) -> String {
        match self {
            SinkUrl::S3 { bucket, prefix } if prefix.is_empty() => {
                mask_url(&format!("s3://{bucket}"))
            }
            SinkUrl::S3 { bucket, prefix } => mask_url(&format!("s3://{bucket}/{prefix}")),
            SinkUrl::File { root } => format!("file://{}", root.display()),
        }
    }
}

/// Setting up the sink or shipping to it failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SinkError {
    #[error("setting up the sink {sink}")]
    Setup {
        sink: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("writing {object} to the sink {sink}")]
    Put {
        sink: String,
        object: String,
        #[source]
        source: object_store::Error,
    },
    #[error("encoding region {region}'s chart {chart} of run {run_id} as Parquet")]
    Encode {
        run_id: String,
        region: String,
        chart: u32,
        #[source]
        source: anyhow::Error,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// A sink ready to write to.
pub(crate) struct Sink {
    url: SinkUrl,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
}

/// How long one object's put may be retried before the run gives up on the sink: a
/// cron run must end, and the outbox keeps the slot for the next one.
const RETRY_TIMEOUT: Duration = Duration::from_secs(20);

impl Sink {
    /// The sink at `url`. S3 reads its settings and credentials from the AWS
    /// environment variables (`AmazonS3Builder::from_env`, listed in docs/commands.md);
    /// plain HTTP is allowed to a loopback endpoint (a local test server), and
    /// otherwise only with `AWS_ALLOW_HTTP=true`.
    pub(crate) fn open(url: &SinkUrl) -> Result<Sink, SinkError> {
        let setup = |source: Box<dyn std::error::Error + Send + Sync>| SinkError::Setup {
            sink: url.shown(),
            source,
        };
        let (store, prefix): (Arc<dyn ObjectStore>, &str) = match url {
            SinkUrl::S3 { bucket, prefix } => {
                let mut builder = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_retry(RetryConfig {
                        max_retries: 3,
                        retry_timeout: RETRY_TIMEOUT,
                        ..RetryConfig::default()
                    });
                // AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL when both are set.
                let endpoint = builder
                    .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
                    .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::Endpoint))
                    .unwrap_or_default();
                if is_loopback_http(&endpoint) {
                    builder = builder.with_allow_http(true);
                }
                let s3 = builder.build().map_err(|e| setup(Box::new(e)))?;
                (Arc::new(s3), prefix)
            }
            SinkUrl::File { root } => {
                std::fs::create_dir_all(root).map_err(|e| {
                    setup(
                        format!(
                            "creating its directory {}: {e}; point --sink at a directory this \
                             user can write (a file, or a link to nothing, stands there in \
                             its place when the error says it exists)",
                            root.display()
                        )
                        .into(),
                    )
                })?;
                let local =
                    LocalFileSystem::new_with_prefix(root).map_err(|e| setup(Box::new(e)))?;
                (Arc::new(local), "")
            }
        };
        Ok(Sink {
            url: url.clone(),
            store,
            prefix: ObjectPath::from(prefix),
        })
    }

    /// The object of `fetch` of `slot`.
    fn object(&self, slot: &QueuedSlot, fetch: &SlotFetch) -> ObjectPath {
        let name = object_name(&slot.region, slot.slot_start, fetch.chart);
        ObjectPath::from_iter(
            self.prefix
                .parts()
                .chain(ObjectPath::from(name.as_str()).parts()),
        )
    }
}

/// Whether `endpoint` is plain HTTP to this host.
fn is_loopback_http(endpoint: &str) -> bool {
    let Ok(url) = url::Url::parse(endpoint) else {
        return false;
    };
    url.scheme() == "http"
        && match url.host() {
            Some(url::Host::Domain(d)) => d == "localhost",
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        }
}

/// The name of the object of `region`'s chart `chart` (0: the overall chart) in the
/// slot that starts at `slot_start` (Unix seconds), under the sink's prefix:
/// `date=YYYY-MM-DD/region=XX/YYYYMMDDTHHMMSSZ-chart-N.parquet`, the date the slot
/// start's UTC date. A name of the slot alone: every host that fetches the slot names
/// its object alike.
pub(crate) fn object_name(region: &str, slot_start: i64, chart: u32) -> String {
    let start = jiff::Timestamp::from_second(slot_start)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "date={}/region={region}/{}-chart-{chart}.parquet",
        start.strftime("%Y-%m-%d"),
        start.strftime("%Y%m%dT%H%M%SZ"),
    )
}

/// What one shipment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Shipped {
    /// Slots now on the sink.
    pub(crate) slots: u64,
    /// Objects written.
    pub(crate) written: u64,
    /// Objects the sink held already (shipped before, by this host or another).
    pub(crate) already: u64,
    /// Slots still queued.
    pub(crate) left: u64,
}

/// Ships every slot the outbox of `db` holds to `sink`, oldest first. Stops at the
/// first slot the sink refuses (the rest would fail alike, each after its retries),
/// recording the error on it; what is not shipped stays queued for the next run.
pub(crate) async fn ship(db: &Db, sink: &Sink, clock: &dyn Clock) -> Result<Shipped, SinkError> {
    let pending = Store::resume(db).sink_pending()?;
    let mut done = Shipped {
        left: pending.len() as u64,
        ..Shipped::default()
    };
    for slot in &pending {
        // Encoded with the store held, written with it let go: the puts await the
        // network, and the connection is the command's one.
        let objects = encode_slot(db, sink, slot)?;
        for (object, bytes) in objects {
            let options = PutOptions::from(PutMode::Create);
            match sink
                .store
                .put_opts(&object, PutPayload::from(bytes), options)
                .await
            {
                Ok(_) => done.written += 1,
                Err(object_store::Error::AlreadyExists { .. }) => done.already += 1,
                Err(source) => {
                    let err = SinkError::Put {
                        sink: sink.url.shown(),
                        object: object.to_string(),
                        source,
                    };
                    let text = crate::error::chain(&err);
                    Store::resume(db).record_sink_error(&slot.run_id, &slot.region, &text)?;
                    return Err(err);
                }
            }
        }
        Store::resume(db).mark_shipped(&slot.run_id, &slot.region, clock.now().to_secs())?;
        done.slots += 1;
        done.left -= 1;
    }
    Ok(done)
}

/// The objects of `slot`: one Parquet file of `export`'s chart places per chart fetch.
fn encode_slot(
    db: &Db,
    sink: &Sink,
    slot: &QueuedSlot,
) -> Result<Vec<(ObjectPath, Vec<u8>)>, SinkError> {
    let store = Store::resume(db);
    let mut objects = Vec::new();
    for fetch in store.slot_fetches(&slot.run_id, &slot.region)? {
        let encode = || -> anyhow::Result<Vec<u8>> {
            let mut table = Table::new(Vec::new(), &PLACES_TABLE, Limits::EXPORT)?;
            store.export_fetch(fetch.fetch, &slot.region, fetch.chart, |row| {
                write_place(&mut table, row)
            })?;
            Ok(table.finish()?)
        };
        let bytes = encode().map_err(|source| SinkError::Encode {
            run_id: slot.run_id.clone(),
            region: slot.region.clone(),
            chart: fetch.chart,
            source,
        })?;
        objects.push((sink.object(slot, &fetch), bytes));
    }
    Ok(objects)
}

#[cfg(test)]
mod tests;
