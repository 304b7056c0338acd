//! The limiter bench's own connection to the server, outside any measurement: it
//! empties keys and reads what the server knows about itself (command times, memory,
//! encodings, version).

use anyhow::{Context, Result};
use redis::Connection;

use crate::stats::CommandTime;

/// The server side, outside any measurement: emptying keys and reading what the
/// server knows about itself.
pub(crate) struct Admin {
    pub(crate) conn: Connection,
}

impl Admin {
    pub(crate) fn flush(&mut self) -> Result<()> {
        redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query::<()>(&mut self.conn)
            .context("emptying the bench redis-server (FLUSHALL)")
    }

    /// Deletes every key matching `pattern`.
    pub(crate) fn delete(&mut self, pattern: &str) -> Result<()> {
        for key in self.scan(pattern)? {
            redis::cmd("DEL")
                .arg(&key)
                .query::<()>(&mut self.conn)
                .with_context(|| format!("deleting {key}"))?;
        }
        Ok(())
    }

    /// `command` is lower case, as `INFO commandstats` names it (`evalsha`, `incr`).
    pub(crate) fn command_time(&mut self, command: &str) -> Result<CommandTime> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn)
            .context("reading INFO commandstats")?;
        let prefix = format!("cmdstat_{command}:");
        let Some(line) = info.lines().find_map(|l| l.strip_prefix(&prefix)) else {
            return Ok(CommandTime::default());
        };
        let field = |name: &str| -> Result<u64> {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .with_context(|| format!("no {name} in INFO commandstats line {line:?}"))?
                .parse()
                .with_context(|| format!("reading {name} in INFO commandstats line {line:?}"))
        };
        Ok(CommandTime {
            calls: field("calls")?,
            usec: field("usec")?,
        })
    }

    pub(crate) fn server_version(&mut self) -> Result<String> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.conn)
            .context("reading INFO server")?;
        info.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .map(|v| v.trim().to_owned())
            .context("no redis_version in INFO server")
    }

    /// Every key matching `pattern`, found with SCAN (never KEYS).
    pub(crate) fn scan(&mut self, pattern: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut self.conn)
                .with_context(|| format!("scanning for keys matching {pattern}"))?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// What the keys take in memory, every nested value counted (`SAMPLES 0`).
    pub(crate) fn memory_of(&mut self, keys: &[String]) -> Result<u64> {
        let mut bytes = 0;
        for key in keys {
            let usage: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0)
                .query(&mut self.conn)
                .with_context(|| format!("reading MEMORY USAGE of {key}"))?;
            bytes += usage.with_context(|| format!("{key} vanished before MEMORY USAGE"))?;
        }
        Ok(bytes)
    }

    /// "key: type/encoding, n element(s)", for the report.
    pub(crate) fn describe(&mut self, key: &str) -> Result<String> {
        let encoding: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .query(&mut self.conn)
            .with_context(|| format!("reading OBJECT ENCODING of {key}"))?;
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query(&mut self.conn)
            .with_context(|| format!("reading TYPE of {key}"))?;
        let len: u64 = if kind == "zset" {
            redis::cmd("ZCARD")
                .arg(key)
                .query(&mut self.conn)
                .with_context(|| format!("reading ZCARD of {key}"))?
        } else {
            1
        };
        Ok(format!("{key}: {kind}/{encoding}, {len} element(s)"))
    }
}
