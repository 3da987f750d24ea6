//! [`Pager`]: the composition. It decides for the frames of one stretch without holding them,
//! owns a replacement policy, a cache manager (and through it the disk manager) and the
//! application's handler, and answers faults, locks, cache resizes and revocations. A call
//! that pages returns [`Step`]s: the frame operations it needs, one at a time, for the caller
//! to do and answer ([`Pager::resume`]), then its [`Outcome`]; it never calls the holder of
//! the frames.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::Page;
use crate::app::{AppHandler, GuaranteeChange};
use crate::cache::{CacheManager, CacheStats};
use crate::disk::StoreStats;
use crate::disk::{DiskStats, SwapSpace};
use crate::error::PagerError;
use crate::plan::{Answer, FaultOutcome, Found, FrameOp, Outcome, Source, Step};
use crate::replace::ReplacementPolicy;

/// A resident page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resident {
    /// The frame it is on.
    pub frame: usize,
    /// Written since it was last stored (or fetched dirty from a cache).
    pub dirty: bool,
    /// Locked: never evicted or revoked.
    pub locked: bool,
    /// Mapped writable.
    pub writable: bool,
}

/// The pager's counts, with those of its top cache and disk manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PagerStats {
    /// Faults answered (including writes to resident read-only pages).
    pub faults: u64,
    /// Faults on pages with no content yet, answered with a zeroed frame.
    pub zero_fills: u64,
    /// Faults answered from the cache manager (hits and misses).
    pub fetches: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Of those, dirty ones (handed down to be stored).
    pub dirty_evictions: u64,
    /// Frames usable now.
    pub frames: usize,
    /// Frames released to revocations.
    pub frames_revoked: usize,
    /// Evictions that failed because the disk kept failing a write (another victim was
    /// chosen, the page kept resident and dirty).
    pub failed_evictions: u64,
    /// Pages lost: the disk kept failing the read of their only copy.
    pub lost_pages: u64,
    /// Fetches of pages the pager had evicted (their reuse distance is known).
    pub refetches: u64,
    /// The reuse distance of a page fetched back: the evictions made after its own, up to and
    /// including the one that made room for it (the pages handed to the caches since it was);
    /// the least, the greatest and the sum over the [`PagerStats::refetches`]. A cache that
    /// keeps the pages last handed to it serves a page only if it holds more pages than that.
    pub reuse_min: u64,
    /// See [`PagerStats::reuse_min`].
    pub reuse_max: u64,
    /// See [`PagerStats::reuse_min`].
    pub reuse_sum: u64,
    /// The top cache manager's counts.
    pub cache: CacheStats,
    /// The disk manager's counts.
    pub disk: DiskStats,
    /// The backing store manager's counts (remote and local pages, fallbacks, population,
    /// pages lost with their servers), if the hierarchy has one.
    pub store: StoreStats,
}

/// A pager for one stretch of `pages` pages.
///
/// A page's contents are in exactly one of three places: resident on a frame, held by the
/// cache manager or the backing store below it, or nowhere (a page never written reads as
/// zero). Eviction unmaps the victim, saves its frame and hands it down: dirty victims as
/// dirty; clean ones as clean, which a cache may keep and otherwise drops because the backing
/// store already holds them; clean victims with no content (zero, never written) are simply
/// forgotten.
///
/// The disk's failures: a victim whose contents cannot be stored because the disk kept failing
/// a write ([`PagerError::WriteFailed`], for it or for a page a cache pushed down to make room)
/// stays resident and dirty, and another victim is chosen, up to [`MAX_VICTIMS`] per frame
/// wanted; the page is written to another slot when next evicted. A page whose only copy the
/// disk cannot read ([`PagerError::PageLost`]) is lost: the application's handler hears of it
/// ([`AppHandler::page_lost`]), [`Pager::lost_pages`] names it, and it reads as zeros from
/// then on, as a page never written; every other page stays intact.
pub struct Pager {
    policy: Box<dyn ReplacementPolicy>,
    cache: Box<dyn CacheManager>,
    app: Box<dyn AppHandler>,
    pages: usize,
    resident: ResidentMap,
    free: Vec<usize>,
    /// Whether a page's contents are stored below (else it is zero or resident only).
    has_content: Vec<bool>,
    /// The eviction that stored each page, counted from 1 and truncated to 32 bits (0: none),
    /// for its reuse distance when it is fetched back.
    evicted_at: Vec<u32>,
    stats: PagerStats,
    evict_ahead: usize,
    /// Evictions between two harvests of the hardware's accessed bits, and since the last.
    harvest_every: usize,
    since_harvest: usize,
    /// Pages lost, in the order they were lost.
    lost: Vec<usize>,
    /// Whether the frames report dirty bits ([`Pager::set_tracks_dirty`]).
    tracks_dirty: bool,
    /// The call being answered.
    job: Job,
    /// The revocation being answered.
    revoking: Revoking,
}

/// Victims an eviction tries, at most, before it fails because the disk keeps failing writes.
pub const MAX_VICTIMS: usize = 8;

/// A call that pages, while the pager answers it.
#[derive(Clone, Copy, Debug)]
enum Call {
    /// None.
    Idle,
    /// A fault on `page` (a lock if `lock`).
    Fault { page: usize, write: bool, lock: bool },
    /// A revocation of `wanted` frames.
    Revoke { wanted: usize },
}

/// The frame operation the pager asked for, whose answer it waits for, and what it needs to
/// go on.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// None asked.
    Nothing,
    /// A resident page mapped writable.
    Protect,
    /// The accessed bits read, before victims are chosen.
    Harvest,
    /// A victim evicted: unmapped, and its frame saved if it was written or has content.
    Evict { victim: usize, r: Resident },
    /// The fault's frame filled from the cache manager, and mapped.
    Fill,
    /// The fault's frame zeroed, and mapped.
    Zero,
    /// Fetched contents handed back to the cache manager after the load failed (`error`).
    HandBack { error: PagerError },
    /// A frame released.
    Release,
}

/// The call being answered, between its steps.
#[derive(Clone, Copy, Debug)]
struct Job {
    call: Call,
    wait: Wait,
    /// A fault's frame, once it has one.
    frame: Option<usize>,
    /// A fault's evictions still to make after the current one.
    ahead: usize,
    /// Victims that failed since the current eviction began.
    tried: usize,
    /// A fault's outcome so far.
    outcome: FaultOutcome,
    /// The dirty mark of the contents fetched into the fault's frame (none fetched: `None`).
    stored_dirty: Option<bool>,
    /// The disk's device writes before the fault's evictions.
    writes_before: u64,
    /// Whether the victim being evicted was written (what its frame's save was told).
    victim_written: bool,
}

/// A revocation's progress.
#[derive(Clone, Copy, Debug, Default)]
struct Revoking {
    /// Frames released so far.
    released: usize,
    /// The error that ended its evictions.
    failure: Option<PagerError>,
}

impl Job {
    const IDLE: Job = Job::new(Call::Idle);

    const fn new(call: Call) -> Job {
        Job {
            call,
            wait: Wait::Nothing,
            frame: None,
            ahead: 0,
            tried: 0,
            outcome: FaultOutcome {
                frame: 0,
                source: Source::Resident,
                evicted: 0,
                evicted_dirty: 0,
                disk_writes: 0,
            },
            stored_dirty: None,
            writes_before: 0,
            victim_written: false,
        }
    }
}

impl Pager {
    /// A pager for a stretch of `pages` pages over `frame_count` frames, numbered
    /// `0..frame_count`, for which every call that pages asks frame operations ([`FrameOp`]).
    pub fn new(
        frame_count: usize,
        pages: usize,
        policy: Box<dyn ReplacementPolicy>,
        cache: Box<dyn CacheManager>,
        app: Box<dyn AppHandler>,
    ) -> Pager {
        let count = frame_count;
        let mut policy = policy;
        policy.reserve(count, pages);
        Pager {
            policy,
            cache,
            app,
            pages,
            resident: ResidentMap::new(pages, count),
            free: (0..count).rev().collect(),
            has_content: vec![false; pages],
            evicted_at: vec![0; pages],
            stats: PagerStats { frames: count, ..PagerStats::default() },
            evict_ahead: 1,
            harvest_every: 0,
            since_harvest: usize::MAX,
            lost: Vec::new(),
            tracks_dirty: false,
            job: Job::IDLE,
            revoking: Revoking::default(),
        }
    }

    /// The cache manager.
    pub fn cache(&self) -> &dyn CacheManager {
        &*self.cache
    }

    /// The stretch's length in pages.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Only frames `0..count` exist after all (fewer were found than the pager was made for):
    /// the others leave the free list. Call before any fault.
    pub fn limit_frames(&mut self, count: usize) {
        self.free.retain(|f| *f < count);
        self.stats.frames = self.stats.frames.min(count);
    }

    /// `page`'s residency, if it is resident.
    pub fn resident(&self, page: usize) -> Option<Resident> {
        self.resident.get(page).copied()
    }

    /// The resident pages, in page order.
    pub fn resident_pages(&self) -> impl Iterator<Item = usize> + '_ {
        self.resident.pages_from(0)
    }

    /// The resident pages from `page` on, in page order.
    pub fn resident_pages_from(&self, page: usize) -> impl Iterator<Item = usize> + '_ {
        self.resident.pages_from(page)
    }

    /// The pages lost (their numbers within the stretch), in the order they were lost.
    pub fn lost_pages(&self) -> &[usize] {
        &self.lost
    }

    /// The swap space of the backing store.
    pub fn swap_space(&self) -> SwapSpace {
        self.cache.swap_space()
    }

    /// Whether the frames report the hardware's dirty bit when a page is unmapped
    /// ([`FrameOp::Evict`]): if so, the pager maps clean pages writable and learns at eviction
    /// whether they were written, instead of taking a protection fault on the first write.
    pub fn set_tracks_dirty(&mut self, tracks: bool) {
        self.tracks_dirty = tracks;
    }

    /// Starts making `page` resident (and dirty and writable if `write`), evicting a victim if
    /// every frame is in use; the [`Step`]s end in its [`FaultOutcome`]. On an error the page
    /// is not resident and nothing stored is lost.
    #[inline]
    pub fn fault(&mut self, page: usize, write: bool) -> Step {
        self.begin_fault(page, write, false)
    }

    /// Starts making `page` resident and locked: it is never evicted or revoked until
    /// unlocked. The [`Step`]s end as a fault's.
    #[inline]
    pub fn lock(&mut self, page: usize) -> Step {
        self.begin_fault(page, false, true)
    }

    /// Starts answering a revocation of `wanted` frames: free frames go first, then victims
    /// are evicted (dirty ones stored) and their frames released. The [`Step`]s end in the
    /// frames released ([`Outcome::Revoked`]), fewer than `wanted` if only locked pages remain
    /// or a page could not be stored. The application hears of it through its handler, and
    /// may resize its cache in answer.
    pub fn revoke(&mut self, wanted: usize) -> Step {
        if let Some(busy) = self.busy() {
            return busy;
        }
        self.start(Call::Revoke { wanted });
        self.revoking = Revoking::default();
        if self.free.len() < wanted {
            return self.harvest_then_evict();
        }
        self.revoke_next()
    }

    /// Takes the answer to the [`FrameOp`] the last [`Step`] asked for, and says what comes
    /// next.
    pub fn resume(&mut self, answer: Answer) -> Step {
        let wait = core::mem::replace(&mut self.job.wait, Wait::Nothing);
        let written = match answer {
            Ok(written) => written,
            Err(e) => return self.failed(wait, e),
        };
        match wait {
            Wait::Nothing => Step::Done(Err(PagerError::BadConfig("no frame operation asked"))),
            Wait::Protect => {
                let Call::Fault { page, write, .. } = self.job.call else { return self.idle() };
                if let Some(r) = self.resident.get_mut(page) {
                    r.writable = true;
                    r.dirty |= write;
                }
                self.fault_done()
            }
            Wait::Harvest => match self.job.call {
                Call::Revoke { .. } => self.revoke_next(),
                _ => self.evict_next(),
            },
            Wait::Evict { victim, r } => {
                let dirty = r.dirty || written;
                if dirty || self.has_content[victim] {
                    self.has_content[victim] = true;
                    self.evicted_at[victim] = (self.stats.evictions + 1) as u32;
                }
                self.victim_gone(victim, r, dirty)
            }
            Wait::Fill => {
                self.stats.fetches += 1;
                self.loaded()
            }
            Wait::Zero => {
                self.stats.zero_fills += u64::from(self.job.outcome.source == Source::ZeroFill);
                self.loaded()
            }
            Wait::HandBack { error } => self.load_failed(error),
            Wait::Release => {
                self.revoking.released += 1;
                self.revoke_next()
            }
        }
    }

    /// Fills `buf`, the contents of the frame a [`FrameOp::Fill`] names, with the faulting
    /// page's contents from the cache manager, and says whether to map it writable.
    pub fn fill(&mut self, buf: &mut Page) -> Result<bool, PagerError> {
        let (Wait::Fill, &Call::Fault { page, .. }) = (&self.job.wait, &self.job.call) else {
            return Err(PagerError::BadConfig("no fill asked"));
        };
        let resident = &self.resident;
        let fetched = self.cache.fetch(page, buf, &|p| resident.contains(p))?;
        self.job.stored_dirty = Some(fetched.dirty);
        self.job.outcome.source = match fetched.found {
            Found::Disk => Source::Miss,
            found => Source::Hit { top: fetched.hit, found },
        };
        Ok(self.writable())
    }

    /// Hands `data`, the contents of the frame a [`FrameOp::Evict`] or a [`FrameOp::Save`]
    /// names, down to the cache manager; `written`: the evicted page was written while mapped
    /// (the dirty bit its unmap read; `false` for a [`FrameOp::Save`]).
    pub fn save(&mut self, data: &Page, written: bool) -> Result<(), PagerError> {
        match (&self.job.wait, &self.job.call) {
            (&Wait::Evict { victim, r }, _) => {
                self.job.victim_written = written;
                self.cache.put(victim, data, r.dirty || written)
            }
            (Wait::HandBack { .. }, &Call::Fault { page, .. }) => {
                self.cache.put(page, data, self.job.stored_dirty == Some(true))
            }
            _ => Err(PagerError::BadConfig("no save asked")),
        }
    }

    /// Tells the replacement policy that the hardware marked `page` accessed (a
    /// [`FrameOp::Harvest`]).
    pub fn accessed(&mut self, page: usize) {
        self.policy.accessed(page);
    }

    /// A step that refuses a new call while another is under way.
    fn busy(&self) -> Option<Step> {
        if matches!(self.job.call, Call::Idle) {
            return None;
        }
        Some(Step::Done(Err(PagerError::BadConfig("another call is under way"))))
    }

    fn begin_fault(&mut self, page: usize, write: bool, lock: bool) -> Step {
        if let Some(busy) = self.busy() {
            return busy;
        }
        if page >= self.pages {
            return Step::Done(Err(PagerError::PageOutOfRange { page, pages: self.pages }));
        }
        self.stats.faults += 1;
        self.start(Call::Fault { page, write, lock });
        if let Some(r) = self.resident.get_mut(page) {
            self.policy.accessed(page);
            let frame = r.frame;
            self.job.frame = Some(frame);
            self.job.outcome.source = Source::Resident;
            if write && !r.writable {
                return self.ask(Wait::Protect, FrameOp::Map { page, frame, writable: true });
            }
            r.dirty |= write;
            return self.fault_done();
        }
        match self.free.pop() {
            Some(frame) => {
                self.job.frame = Some(frame);
                self.load()
            }
            None => {
                self.job.ahead = self.evict_ahead - 1;
                self.job.writes_before = self.cache.device_writes();
                self.harvest_then_evict()
            }
        }
    }

    /// Starts answering `call`: what a call keeps between its steps starts afresh.
    fn start(&mut self, call: Call) {
        let job = &mut self.job;
        job.call = call;
        job.wait = Wait::Nothing;
        job.frame = None;
        job.stored_dirty = None;
        job.outcome.source = Source::Resident;
        job.outcome.evicted = 0;
        job.outcome.evicted_dirty = 0;
        job.outcome.disk_writes = 0;
    }

    fn ask(&mut self, wait: Wait, op: FrameOp) -> Step {
        self.job.wait = wait;
        Step::Do(op)
    }

    /// Ends the call, answering it with `e`.
    fn fail(&mut self, e: PagerError) -> Step {
        self.job.call = Call::Idle;
        Step::Done(Err(e))
    }

    /// Ends a call that lost track of itself (never, with the steps answered in order).
    fn idle(&mut self) -> Step {
        self.fail(PagerError::BadConfig("the pager lost track of its call"))
    }

    /// The frame operation asked for while waiting as `wait` failed with `e`.
    fn failed(&mut self, wait: Wait, e: PagerError) -> Step {
        match wait {
            Wait::Nothing | Wait::Protect | Wait::Harvest | Wait::Release => self.fail(e),
            // The victim is mapped as it was: it stays resident (dirty if its save heard it
            // was written), and the policy hears of it as accessed, so it is not chosen again
            // at once. A victim the disk could not store gives way to another.
            Wait::Evict { victim, .. } => {
                if let Some(r) = self.resident.get_mut(victim) {
                    r.dirty |= self.job.victim_written;
                }
                self.policy.accessed(victim);
                if let PagerError::WriteFailed { .. } = e {
                    self.stats.failed_evictions += 1;
                    self.job.tried += 1;
                    if self.job.tried < MAX_VICTIMS.min(self.resident.len()) {
                        return self.evict_next();
                    }
                }
                self.evicted(Err(e))
            }
            Wait::Fill => match self.job.call {
                // Nothing holds the page any more: it goes on as a page never written.
                Call::Fault { page, .. } if e == (PagerError::PageLost { page }) => {
                    self.has_content[page] = false;
                    self.evicted_at[page] = 0;
                    self.stats.lost_pages += 1;
                    self.lost.push(page);
                    self.app.page_lost(page);
                    self.job.outcome.source = Source::Lost;
                    self.zero_frame()
                }
                // Fetched, then not mapped: the fetch counts, and its contents go back.
                _ if self.job.stored_dirty.is_some() => {
                    self.stats.fetches += 1;
                    if let Call::Fault { page, .. } = self.job.call {
                        self.note_reuse(page);
                    }
                    self.hand_back(e)
                }
                _ => self.hand_back(e),
            },
            Wait::Zero | Wait::HandBack { .. } => self.load_failed(e),
        }
    }

    /// Asks for the accessed bits first if a harvest is due, then evicts (or, in a
    /// revocation, goes on releasing).
    ///
    /// Tells the replacement policy of the accesses the hardware marked since the last
    /// harvest (frames that keep accessed bits), before it chooses victims: at most once every
    /// [`Pager::set_harvest_every`] evictions, as reading the bits costs a kernel call for
    /// every run of resident pages.
    fn harvest_then_evict(&mut self) -> Step {
        if self.harvest_every != 0 && self.since_harvest >= self.harvest_every {
            self.since_harvest = 0;
            return self.ask(Wait::Harvest, FrameOp::Harvest);
        }
        match self.job.call {
            Call::Revoke { .. } => self.revoke_next(),
            _ => self.evict_next(),
        }
    }

    /// Chooses the policy's victim and asks for it to be evicted.
    ///
    /// A victim that cannot be stored because the disk kept failing a write stays resident
    /// and dirty (the policy hears of it as accessed, so it is not chosen again at once) and
    /// another is tried, up to [`MAX_VICTIMS`] (or every resident page); the eviction fails
    /// with the last such error if none could be.
    fn evict_next(&mut self) -> Step {
        if self.resident.is_empty() {
            return self.evicted(Err(PagerError::NoFrames));
        }
        let Some(victim) = self.policy.victim() else {
            return self.evicted(Err(PagerError::AllFramesLocked));
        };
        let Some(&r) = self.resident.get(victim) else {
            let why = "the policy chose a page that is not resident";
            return self.evicted(Err(PagerError::BadConfig(why)));
        };
        if r.locked {
            return self.evicted(Err(PagerError::BadConfig("the policy chose a locked page")));
        }
        self.job.victim_written = false;
        let keep = r.dirty || self.has_content[victim];
        let op = FrameOp::Evict { page: victim, frame: r.frame, keep, writable: r.writable };
        self.ask(Wait::Evict { victim, r }, op)
    }

    /// `victim`, unmapped (and saved if it had to be), leaves.
    fn victim_gone(&mut self, victim: usize, r: Resident, dirty: bool) -> Step {
        if dirty {
            self.stats.dirty_evictions += 1;
        }
        self.stats.evictions += 1;
        self.since_harvest = self.since_harvest.saturating_add(1);
        self.resident.remove(victim);
        self.policy.unmapped(victim);
        self.job.outcome.evicted += 1;
        self.job.outcome.evicted_dirty += u32::from(dirty);
        self.evicted(Ok(r.frame))
    }

    /// One eviction ended, with the victim's frame or an error. A fault's first eviction
    /// gives the page its frame, and its error is the fault's; those it makes ahead give
    /// theirs to the free list, and the first that fails ends them. A revocation releases the
    /// frame, and stops at an error.
    fn evicted(&mut self, result: Result<usize, PagerError>) -> Step {
        self.job.tried = 0;
        match (self.job.call, result) {
            (Call::Fault { .. }, Ok(frame)) if self.job.frame.is_none() => {
                self.job.frame = Some(frame)
            }
            (Call::Fault { .. }, Err(e)) if self.job.frame.is_none() => return self.fail(e),
            (Call::Fault { .. }, Ok(frame)) => self.free.push(frame),
            (Call::Fault { .. }, Err(_)) => self.job.ahead = 0,
            (Call::Revoke { .. }, Ok(frame)) => {
                return self.ask(Wait::Release, FrameOp::Release { frame });
            }
            (Call::Revoke { .. }, Err(PagerError::AllFramesLocked)) => return self.revoke_done(),
            (Call::Revoke { .. }, Err(e)) => {
                self.revoking.failure = Some(e);
                return self.revoke_done();
            }
            (Call::Idle, _) => return self.idle(),
        }
        if self.job.ahead > 0 {
            self.job.ahead -= 1;
            return self.evict_next();
        }
        let writes = self.cache.device_writes();
        self.job.outcome.disk_writes = writes - self.job.writes_before;
        self.load()
    }

    /// Fills the fault's frame with its page: fetched straight into the frame if stored,
    /// else zeroed.
    fn load(&mut self) -> Step {
        let (Call::Fault { page, .. }, Some(frame)) = (self.job.call, self.job.frame) else {
            return self.idle();
        };
        if self.has_content[page] {
            return self.ask(Wait::Fill, FrameOp::Fill { page, frame });
        }
        self.job.outcome.source = Source::ZeroFill;
        self.zero_frame()
    }

    fn zero_frame(&mut self) -> Step {
        let (Call::Fault { page, .. }, Some(frame)) = (self.job.call, self.job.frame) else {
            return self.idle();
        };
        let writable = self.writable();
        self.ask(Wait::Zero, FrameOp::Zero { page, frame, writable })
    }

    /// Whether the faulting page is mapped writable: a dirty page at once, as there is nothing
    /// more to learn from a write, and every page when the frames keep dirty bits.
    fn writable(&self) -> bool {
        let Call::Fault { write, .. } = self.job.call else { return false };
        write || self.job.stored_dirty == Some(true) || self.tracks_dirty
    }

    /// The faulting page is filled and mapped: it is resident.
    fn loaded(&mut self) -> Step {
        let (Call::Fault { page, write, .. }, Some(frame)) = (self.job.call, self.job.frame) else {
            return self.idle();
        };
        if self.job.stored_dirty.is_some() {
            self.note_reuse(page);
        }
        let dirty = write || self.job.stored_dirty == Some(true);
        let writable = dirty || self.tracks_dirty;
        self.resident.insert(page, Resident { frame, dirty, locked: false, writable });
        self.policy.mapped(page);
        self.fault_done()
    }

    /// Gives the page's contents, fetched into the frame, back to the cache manager as they
    /// came, after the load failed with `error`; then fails.
    fn hand_back(&mut self, error: PagerError) -> Step {
        match (self.job.stored_dirty, self.job.frame) {
            (Some(_), Some(frame)) => self.ask(Wait::HandBack { error }, FrameOp::Save { frame }),
            _ => self.load_failed(error),
        }
    }

    /// The fault's frame goes back to the free list and the fault fails with `e`.
    fn load_failed(&mut self, e: PagerError) -> Step {
        if let Some(frame) = self.job.frame {
            self.free.push(frame);
        }
        self.fail(e)
    }

    /// The fault is answered: its page is resident (and locked, for a lock).
    fn fault_done(&mut self) -> Step {
        let (Call::Fault { page, lock, .. }, Some(frame)) = (self.job.call, self.job.frame) else {
            return self.idle();
        };
        if lock {
            if let Some(r) = self.resident.get_mut(page) {
                r.locked = true;
            }
            self.policy.locked(page);
        }
        let outcome = FaultOutcome { frame, ..self.job.outcome };
        self.job.call = Call::Idle;
        Step::Done(Ok(Outcome::Fault(outcome)))
    }

    /// Releases the next frame a revocation gives back: a free one, else a victim's.
    fn revoke_next(&mut self) -> Step {
        let Call::Revoke { wanted } = self.job.call else { return self.idle() };
        if self.revoking.released >= wanted {
            return self.revoke_done();
        }
        match self.free.pop() {
            Some(frame) => self.ask(Wait::Release, FrameOp::Release { frame }),
            None if self.resident.is_empty() => self.revoke_done(),
            None => self.evict_next(),
        }
    }

    /// The revocation is answered: the frames released are counted and the application told.
    fn revoke_done(&mut self) -> Step {
        let Revoking { released, failure } = core::mem::take(&mut self.revoking);
        self.job.call = Call::Idle;
        self.stats.frames -= released;
        self.stats.frames_revoked += released;
        let change = GuaranteeChange::FramesRevoked { released, frames_now: self.stats.frames };
        if let Some(bytes) = self.app.guarantees_changed(change)
            && let Err(e) = self.cache.resize(bytes)
        {
            return Step::Done(Err(e));
        }
        Step::Done(match failure {
            Some(e) if released == 0 => Err(e),
            _ => Ok(Outcome::Revoked(released)),
        })
    }

    /// Counts `page`'s reuse distance, fetched back now, if its eviction was recorded.
    fn note_reuse(&mut self, page: usize) {
        let at = core::mem::take(&mut self.evicted_at[page]);
        if at == 0 {
            return;
        }
        let s = &mut self.stats;
        let distance = u64::from((s.evictions as u32).wrapping_sub(at));
        s.reuse_min = if s.refetches == 0 { distance } else { s.reuse_min.min(distance) };
        s.reuse_max = s.reuse_max.max(distance);
        s.reuse_sum += distance;
        s.refetches += 1;
    }

    /// Sets how many evictions pass between two harvests of the accessed bits; 0 (the
    /// default), never. Harvesting makes the clock a true second-chance clock; without it the
    /// policy hears of faults only and the clock evicts nearly in FIFO order, as the thesis's
    /// did, which keeps pages evicted together in the program's order (what the friends disk
    /// manager stores and reads back as a group). `cargo xtask bench paging` measures both.
    pub fn set_harvest_every(&mut self, evictions: usize) {
        self.harvest_every = evictions;
    }

    /// Sets how many pages a fault that finds no free frame evicts (at least one): the extra
    /// frames serve the next faults, which then skip eviction, and its compression or write.
    pub fn set_evict_ahead(&mut self, pages: usize) {
        self.evict_ahead = pages.max(1);
    }

    /// Lets a locked page be evicted again.
    pub fn unlock(&mut self, page: usize) {
        if let Some(r) = self.resident.get_mut(page) {
            r.locked = false;
            self.policy.unlocked(page);
        }
    }

    /// Resizes the cache to `bytes`.
    pub fn resize_cache(&mut self, bytes: usize) -> Result<(), PagerError> {
        self.cache.resize(bytes)
    }

    /// Empties the caches into the backing store (resident pages stay resident).
    pub fn flush_cache(&mut self) -> Result<(), PagerError> {
        self.cache.flush()
    }
    /// The cache manager, to drive it directly (tests).
    #[cfg(test)]
    pub(crate) fn cache_mut_for_test(&mut self) -> &mut dyn CacheManager {
        &mut *self.cache
    }

    /// The pager's counts.
    pub fn stats(&self) -> PagerStats {
        PagerStats {
            cache: self.cache.stats(),
            disk: self.cache.disk_stats(),
            store: self.cache.store_stats(),
            ..self.stats
        }
    }
}

/// The resident pages: for each page of the stretch the frame it is on, and for each frame the
/// page on it and its residency, so that a fault finds, adds and removes a page's residency by
/// indexing, with no search (4 bytes a page of the stretch, as the eviction counts, and 24 a
/// frame). The pages in order are a scan of the stretch's pages (a harvest of accessed bits).
#[derive(Debug)]
struct ResidentMap {
    /// By page: its frame plus one, 0 if it is not resident.
    frame_of: Vec<u32>,
    /// By frame: the page on it and its residency, if a page is resident on it.
    by_frame: Vec<Option<(usize, Resident)>>,
    /// How many pages are resident.
    count: usize,
}

impl ResidentMap {
    /// For a stretch of `pages` pages over frames `0..frames`.
    ///
    /// # Panics
    /// If there are `u32::MAX` frames or more.
    fn new(pages: usize, frames: usize) -> ResidentMap {
        assert!(frames < u32::MAX as usize, "frames are numbered in 32 bits");
        ResidentMap { frame_of: vec![0; pages], by_frame: vec![None; frames], count: 0 }
    }

    #[inline]
    fn frame(&self, page: usize) -> Option<usize> {
        let f = *self.frame_of.get(page)?;
        (f != 0).then(|| f as usize - 1)
    }

    #[inline]
    fn get(&self, page: usize) -> Option<&Resident> {
        let f = self.frame(page)?;
        self.by_frame.get(f)?.as_ref().map(|(_, r)| r)
    }

    #[inline]
    fn get_mut(&mut self, page: usize) -> Option<&mut Resident> {
        let f = self.frame(page)?;
        self.by_frame.get_mut(f)?.as_mut().map(|(_, r)| r)
    }

    #[inline]
    fn contains(&self, page: usize) -> bool {
        self.frame(page).is_some()
    }

    /// Makes `page` resident as `r` (on `r.frame`, which no other page is on).
    #[inline]
    fn insert(&mut self, page: usize, r: Resident) {
        if let Some(old) = self.frame(page) {
            self.by_frame[old] = None;
            self.count -= 1;
        }
        if self.by_frame.len() <= r.frame {
            self.by_frame.resize(r.frame + 1, None);
        }
        self.frame_of[page] = r.frame as u32 + 1;
        self.by_frame[r.frame] = Some((page, r));
        self.count += 1;
    }

    /// `page` is no longer resident.
    #[inline]
    fn remove(&mut self, page: usize) -> Option<Resident> {
        let f = self.frame(page)?;
        self.frame_of[page] = 0;
        self.count -= 1;
        self.by_frame[f].take().map(|(_, r)| r)
    }

    fn len(&self) -> usize {
        self.count
    }

    fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The resident pages from `page` on, in page order.
    fn pages_from(&self, page: usize) -> impl Iterator<Item = usize> + '_ {
        let rest = self.frame_of.get(page..).unwrap_or(&[]);
        rest.iter().enumerate().filter(|(_, f)| **f != 0).map(move |(i, _)| page + i)
    }
}

#[cfg(test)]
mod resident_map_tests {
    use super::{Resident, ResidentMap};
    use alloc::vec::Vec;

    fn on(frame: usize) -> Resident {
        Resident { frame, dirty: false, locked: false, writable: false }
    }

    #[test]
    fn pages_are_found_by_page_moved_removed_and_listed_in_page_order() {
        let mut m = ResidentMap::new(100, 4);
        assert!(m.is_empty() && m.get(0).is_none() && m.get(100).is_none());
        m.insert(70, on(0));
        m.insert(3, on(2));
        m.insert(41, on(3));
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(3).map(|r| r.frame), Some(2));
        assert!(m.contains(70) && !m.contains(69) && !m.contains(1000));
        m.get_mut(41).expect("resident").dirty = true;
        assert_eq!(
            m.get(41),
            Some(&Resident { frame: 3, dirty: true, locked: false, writable: false })
        );
        assert_eq!(m.pages_from(0).collect::<Vec<_>>(), [3, 41, 70]);
        assert_eq!(m.pages_from(4).collect::<Vec<_>>(), [41, 70]);
        assert_eq!(m.pages_from(71).count(), 0);
        assert_eq!(m.pages_from(500).count(), 0);
        // Page 3 moves to frame 1: frame 2 holds nothing any more.
        m.insert(3, on(1));
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(3).map(|r| r.frame), Some(1));
        assert!(m.by_frame[2].is_none());
        assert_eq!(m.remove(70).map(|r| r.frame), Some(0));
        assert_eq!(m.remove(70), None);
        assert_eq!(m.len(), 2);
        assert!(!m.contains(70) && m.by_frame[0].is_none());
        assert_eq!(m.pages_from(0).collect::<Vec<_>>(), [3, 41]);
    }
}
