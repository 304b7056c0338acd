//! The simulated year of the charts bench: what every run of every region writes, hour
//! by hour, in the order it writes it, told to a `Sink` so that bulk SQL and the
//! product's `Store` API write the same year.

use std::collections::BTreeSet;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use trendsync::region_status::CallOutcome;
use trendsync::store::{CallCount, VideoRecord};

use crate::{RANKS, REGIONS, Res, Synth, Words, counts, new_video};

/// The overall chart (0) and the two categories every region follows.
const CHARTS: [u32; 3] = [0, 17, 25];
const PAGE: usize = 50;
const NEW_PER_CHART_PER_DAY: f64 = 60.0;
const FOLLOW_DAYS_S: i64 = 7 * 86_400;
const FOLLOW_EVERY_S: i64 = 6 * 3600;
/// Seconds after a run's start at which its follow-ups are stored: after its
/// 3 charts × 4 pages, one a second.
const FOLLOW_AFTER_S: i64 = 12;

pub(crate) type Counts = (i64, Option<i64>, Option<i64>);

/// What a run writes, in the order it writes it; implemented by bulk SQL and by the
/// product's `Store`.
pub(crate) trait Sink {
    /// A video was made (before its first place).
    fn new_video(&mut self, idx: usize, record: VideoRecord) -> Res<()>;
    fn categories(&mut self, region: &str, at: i64) -> Res<()>;
    fn begin_run(&mut self, run_id: &str, region: &str, at: i64) -> Res<()>;
    /// One page of one chart: (video idx, its num, its counts) by rank.
    fn page(
        &mut self,
        run_id: &str,
        region: &str,
        chart: u32,
        first_rank: u32,
        videos: &[(usize, i64, Counts)],
        fetched_at: i64,
    ) -> Res<()>;
    /// One follow-up call's answer: every video asked for, counted.
    fn follow(&mut self, asked: &[(usize, i64, Counts)], at: i64) -> Res<()>;
    fn end_run(&mut self, run_id: &str, region: &str, end: &RunEnd) -> Res<()>;
    fn day_done(&mut self) -> Res<()>;
    fn finish(&mut self) -> Res<()>;
}

/// How a run ended.
pub(crate) struct RunEnd {
    pub(crate) at: i64,
    pub(crate) pages: u64,
    pub(crate) videos: u64,
    pub(crate) follow_calls: u64,
}

impl RunEnd {
    pub(crate) fn units(&self) -> u64 {
        // Default cost file: 1 unit a page, 1 a follow-up call.
        self.pages + self.follow_calls
    }

    /// How long the run took, as its process measures it: 0.4 s a call.
    pub(crate) fn duration_us(&self) -> u64 {
        self.units() * 400_000
    }

    pub(crate) fn calls(&self) -> Vec<CallCount> {
        let call = |method: &str, calls| CallCount {
            method: method.into(),
            outcome: CallOutcome::Ok.into(),
            calls,
        };
        vec![
            call("videos.list", self.pages),
            call("videos.batchGetStats", self.follow_calls),
        ]
    }
}

/// Per video: its synthetic growth, its store number (0 before its first place), and
/// its follow-up state (last on a chart, last counted).
struct Followed {
    synth: Synth,
    num: i64,
    charted_at: i64,
    counted_at: i64,
}

/// Writes `days` of the year into `sink`. Returns (places, follow-up rows, videos
/// stored: a video made for a chart and pushed off it before its first fetch is not).
pub(crate) fn simulate(sink: &mut dyn Sink, days: u32, end: i64) -> Res<(u64, u64, usize)> {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(2026);
    let words = Words::new();
    let channels: Vec<String> = (0..5000).map(|_| words.text(&mut rng, 2)).collect();
    let hours = i64::from(days) * 24;
    let start = end - hours * 3600;
    let mut all: Vec<Followed> = Vec::new();
    let mut next_num = 1i64;
    // (counted_at, num, idx) of every video that was on a chart: due ones come first.
    let mut queue: BTreeSet<(i64, i64, usize)> = BTreeSet::new();
    // Per region and chart: the videos on it (idx) and their scores.
    let mut charts: Vec<Vec<Vec<(usize, f64)>>> =
        vec![vec![Vec::new(); CHARTS.len()]; REGIONS.len()];
    let mut due = vec![vec![0.0f64; CHARTS.len()]; REGIONS.len()];
    let (mut places, mut follows) = (0u64, 0u64);

    let make = |rng: &mut StdRng,
                all: &mut Vec<Followed>,
                sink: &mut dyn Sink,
                chart: u32,
                at: i64|
     -> Res<usize> {
        let (synth, mut record) = new_video(rng, &words, &channels, at);
        if chart != 0 {
            record.category_id = Some(chart.to_string());
        }
        all.push(Followed {
            synth,
            num: 0,
            charted_at: 0,
            counted_at: 0,
        });
        sink.new_video(all.len() - 1, record)?;
        Ok(all.len() - 1)
    };

    for region in REGIONS {
        sink.categories(region, start - 3600)?;
    }
    // The charts as the year begins: videos that entered over the 3 days before.
    for region_charts in charts.iter_mut() {
        for (chart, &category) in region_charts.iter_mut().zip(&CHARTS) {
            for _ in 0..RANKS {
                let at = start - rng.random_range(0..72 * 3600);
                let idx = make(&mut rng, &mut all, sink, category, at)?;
                chart.push((idx, rng.random_range(0.0..1.0)));
            }
        }
    }
    for hour in 0..hours {
        let hour_at = start + hour * 3600;
        for (r, region) in REGIONS.iter().enumerate() {
            let at = hour_at + r as i64 * 5 * 60;
            let run_id = format!("{:x}-{:08x}", at * 1000, rng.random::<u32>());
            sink.begin_run(&run_id, region, at)?;
            let mut pages = 0u64;
            for (c, &chart) in CHARTS.iter().enumerate() {
                // New videos enter at the top; the weakest leave, so the chart stays at 200.
                due[r][c] += NEW_PER_CHART_PER_DAY / 24.0;
                while due[r][c] >= 1.0 {
                    due[r][c] -= 1.0;
                    let idx = make(&mut rng, &mut all, sink, chart, at)?;
                    charts[r][c].push((idx, 1.5));
                }
                for entry in charts[r][c].iter_mut() {
                    entry.1 = entry.1 * 0.985 + rng.random_range(-0.02..0.02);
                }
                charts[r][c].sort_by(|a, b| b.1.total_cmp(&a.1));
                charts[r][c].truncate(RANKS);
                for (p, page) in charts[r][c].chunks(PAGE).enumerate() {
                    let fetched_at = at + (c * RANKS / PAGE + p) as i64;
                    let mut rows = Vec::with_capacity(page.len());
                    for &(idx, _) in page {
                        let v = &mut all[idx];
                        if v.num == 0 {
                            v.num = next_num;
                            next_num += 1;
                        } else {
                            queue.remove(&(v.counted_at, v.num, idx));
                        }
                        v.charted_at = fetched_at;
                        v.counted_at = v.counted_at.max(fetched_at);
                        queue.insert((v.counted_at, v.num, idx));
                        rows.push((idx, v.num, counts(&v.synth, fetched_at)));
                    }
                    sink.page(
                        &run_id,
                        region,
                        chart,
                        (p * PAGE + 1) as u32,
                        &rows,
                        fetched_at,
                    )?;
                    places += rows.len() as u64;
                    pages += 1;
                }
            }
            // Follow-ups: charted since now - 7 d, counted at or before now - 6 h,
            // stalest first, 50 a call.
            let follow_at = at + FOLLOW_AFTER_S;
            let mut asked = Vec::new();
            let mut stale = Vec::new();
            for &(counted_at, num, idx) in &queue {
                if counted_at > at - FOLLOW_EVERY_S {
                    break;
                }
                if all[idx].charted_at < at - FOLLOW_DAYS_S {
                    // Never due again unless it charts again (which queues it anew).
                    stale.push((counted_at, num, idx));
                } else {
                    asked.push((idx, num, counts(&all[idx].synth, follow_at)));
                }
            }
            for key in stale {
                queue.remove(&key);
            }
            let mut follow_calls = 0u64;
            for batch in asked.chunks(PAGE) {
                sink.follow(batch, follow_at)?;
                follow_calls += 1;
            }
            for &(idx, num, _) in &asked {
                let v = &mut all[idx];
                queue.remove(&(v.counted_at, num, idx));
                v.counted_at = follow_at;
                queue.insert((follow_at, num, idx));
            }
            follows += asked.len() as u64;
            let end = RunEnd {
                at: follow_at + 1,
                pages,
                videos: pages * PAGE as u64,
                follow_calls,
            };
            sink.end_run(&run_id, region, &end)?;
        }
        if hour % 24 == 23 {
            sink.day_done()?;
            if hour % (24 * 30) == 24 * 30 - 1 {
                eprintln!(
                    "day {} of {days}: {} videos, {places} places, {follows} follow-ups, {:.0?}",
                    hour / 24 + 1,
                    all.len(),
                    started.elapsed()
                );
            }
        }
    }
    sink.finish()?;
    Ok((places, follows, all.iter().filter(|v| v.num != 0).count()))
}
