//! The parsed budget's fingerprint (docs/budget.md, "When the costs file changes"): what
//! two hosts charging one `budget.key` must agree on, as a short stable text.
//!
//! It covers what shapes the windows (every bucket's name, window and costs; every limit's
//! name, methods, window and unit), not the file's bytes, comments or order. Not the
//! quotas, ceilings and maxima either: they are how far a caller may fill a window, not
//! what it holds (the ceiling is each caller's limit over one shared log), so hosts may
//! differ in them and raising one counts nothing again. Nor `[when_limiter_down]`, which
//! decides nothing the window holds. It is written into the limiter beside the budget's
//! keys and into each run's row, so it must not change between builds for the same budget:
//! the canonical text below and FNV-1a are spelled out here, not left to a hasher whose
//! output may change.

use std::fmt::Write as _;

use super::{Budget, Per, Window};

impl Budget {
    /// 16 hex digits naming this budget's parsed shape.
    pub fn fingerprint(&self) -> String {
        format!("{:016x}", fnv1a(self.canonical().as_bytes()))
    }

    /// One line per bucket (the main one first), then one per limit, each field in a
    /// fixed order; methods and costs are sorted by the maps that hold them.
    fn canonical(&self) -> String {
        let mut out = String::new();
        for b in self.buckets() {
            let _ = write!(out, "bucket {} window={}", b.name, window_text(&b.window));
            for (method, cost) in &b.costs {
                let _ = write!(out, " {method}={cost}");
            }
            out.push('\n');
        }
        let mut limits: Vec<_> = self.limits.iter().collect();
        limits.sort_by(|a, b| a.name.cmp(&b.name));
        for l in limits {
            let mut methods = l.methods.clone();
            methods.sort();
            let per = match l.per {
                Per::Unit => "unit",
                Per::Call => "call",
            };
            let _ = writeln!(
                out,
                "limit {} window={} per={per} methods={}",
                l.name,
                window_text(&l.window),
                methods.join(",")
            );
        }
        out
    }
}

/// A sliding window in whole microseconds, a day by its zone's name.
fn window_text(w: &Window) -> String {
    match w {
        Window::Sliding(d) => format!("{}us", d.as_micros()),
        Window::Day(zone) => format!("day@{}", zone.name()),
    }
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests;
