//! The charts bench's reference writer: every write through the product's own `Store`
//! API, call for call as a run makes them, for `charts-check` to compare bulk SQL with.

use std::collections::HashMap;

use trendsync::region_status::RegionStatus;
use trendsync::store::{FollowCounts, RegionOutcome, RunKind, RunOutcome, Store, VideoRecord};

use super::bulk::CATEGORIES;
use super::simulation::{Counts, RunEnd, Sink};
use crate::Res;
use trendsync::clock::Secs;

/// Makes every write through the product's `Store`, as a run does.
pub(crate) struct ViaStore {
    pub(crate) store: Store,
    pub(crate) records: HashMap<usize, VideoRecord>,
}

impl Sink for ViaStore {
    fn new_video(&mut self, idx: usize, record: VideoRecord) -> Res<()> {
        self.records.insert(idx, record);
        Ok(())
    }

    fn categories(&mut self, region: &str, at: i64) -> Res<()> {
        let names: Vec<(String, String)> = CATEGORIES
            .iter()
            .map(|(id, t)| ((*id).into(), (*t).into()))
            .collect();
        self.store.store_categories(region, &names, Secs::new(at))?;
        Ok(())
    }

    fn begin_run(&mut self, run_id: &str, region: &str, at: i64) -> Res<()> {
        self.store.begin_run(run_id, RunKind::Run, Secs::new(at))?;
        self.store
            .begin_run_regions(run_id, Secs::new(at), &[region.to_owned()])?;
        Ok(())
    }

    fn page(
        &mut self,
        run_id: &str,
        region: &str,
        chart: u32,
        first_rank: u32,
        videos: &[(usize, i64, Counts)],
        fetched_at: i64,
    ) -> Res<()> {
        let page = videos
            .iter()
            .map(|&(idx, _, c)| {
                let mut v = self.records.get(&idx).ok_or("an unknown video")?.clone();
                (v.view_count, v.like_count, v.comment_count) = (Some(c.0), c.1, c.2);
                Ok(v)
            })
            .collect::<Res<Vec<VideoRecord>>>()?;
        let category = (chart != 0).then_some(chart);
        self.store.store_chart_page(
            run_id,
            region,
            category,
            first_rank,
            &page,
            Secs::new(fetched_at),
        )?;
        Ok(())
    }

    fn follow(&mut self, asked: &[(usize, i64, Counts)], at: i64) -> Res<()> {
        let id = |idx: usize| -> Res<String> {
            Ok(self.records.get(&idx).ok_or("an unknown video")?.id.clone())
        };
        let ids = asked
            .iter()
            .map(|&(idx, ..)| id(idx))
            .collect::<Res<Vec<_>>>()?;
        let counts = asked
            .iter()
            .map(|&(idx, _, c)| {
                Ok(FollowCounts {
                    video_id: id(idx)?,
                    view_count: Some(c.0),
                    like_count: c.1,
                    comment_count: c.2,
                })
            })
            .collect::<Res<Vec<_>>>()?;
        self.store.store_follow_ups(&ids, &counts, Secs::new(at))?;
        Ok(())
    }

    fn end_run(&mut self, run_id: &str, region: &str, end: &RunEnd) -> Res<()> {
        self.store.mark_region_complete(region, Secs::new(end.at))?;
        self.store.finish_run(
            run_id,
            &RunOutcome {
                status: RegionStatus::Complete,
                units: end.units(),
                calls: end.units(),
                stop_reason: None,
                ended_at: Secs::new(end.at),
                duration_us: end.duration_us(),
            },
        )?;
        let outcome = RegionOutcome {
            region: region.into(),
            status: RegionStatus::Complete.into(),
            pages: end.pages,
            videos: end.videos,
            units: end.units(),
            reason: None,
        };
        self.store
            .record_run_details(run_id, &[outcome], &end.calls())?;
        Ok(())
    }

    fn day_done(&mut self) -> Res<()> {
        Ok(())
    }

    fn finish(&mut self) -> Res<()> {
        self.store.checkpoint()?;
        Ok(())
    }
}
