//! The advertising threshold algorithm of a paging server (Heracles §10.3.3, Fig 10.4).
//!
//! Every poll ([`AdvertiserConfig::poll_ns`], 10 s by default) the server looks at its memory
//! ([`Sample`]) and runs Fig 10.4 exactly:
//!
//! ```text
//! if committed > MAX_THRESHOLD                                     revoke (committed - MAX_THRESHOLD)
//! else if committed <= THRESHOLD && free >= prev_free && cpu_committable
//!      if committed + advertised <= THRESHOLD                      advert += 10%
//!      else                                                        advert -= 5%
//! else if prev_free > free || prev_cpu > cpu                       advert -= 20%   (back-off)
//! ```
//!
//! The choices the thesis leaves open:
//! - `THRESHOLD = MAX_THRESHOLD - 11%` is read as 89% of `MAX_THRESHOLD`; the steps of 10%,
//!   5% and 20% are fractions of `THRESHOLD` (added or taken away, never below zero). With the
//!   increase taken only while `committed + advertised <= THRESHOLD`, committed plus advertised
//!   memory never passes `THRESHOLD + 10%` ([`Advertiser::ceiling`]) through the advert's
//!   growth; the advert is also clipped to `ceiling - committed` at every poll, so the bound
//!   holds when committed memory grew between polls too. Since `THRESHOLD + 10%` is 97.9% of
//!   `MAX_THRESHOLD`, admitting clients within the ceiling never pushes committed memory over
//!   `MAX_THRESHOLD`: only local domains starting up can make the server revoke (§10.3.3,
//!   "a connection by a client can never cause another client to be revoked").
//! - `cpu` is the CPU the server could still commit (its free share, any unit): a fall since
//!   the last poll backs the advert off, as a fall in free memory does.
//! - While it asks for a revocation the server advertises nothing.
//! - The first poll compares the sample with itself (nothing fell).
//!
//! Adverts go to every trader (up to [`MAX_TRADERS`]) when the advertised amount changed, and
//! to a trader that did not answer the last one ([`Advertiser::unreachable`]) at the next poll
//! even if unchanged. [`Advertiser::admitted`] backs the advert off at once when the server
//! admits a client (by the memory admitted and the 20% step) and asks for it to be sent now.

/// The most traders a server advertises to.
pub const MAX_TRADERS: usize = 3;

/// The advertising algorithm's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdvertiserConfig {
    /// Nanoseconds between polls (10 s by default).
    pub poll_ns: u64,
    /// `MAX_THRESHOLD`: the committed memory (local domains and remote clients, bytes) above
    /// which the server revokes.
    pub max_threshold: u64,
    /// How many traders it advertises to (1 to [`MAX_TRADERS`]).
    pub traders: usize,
}

impl AdvertiserConfig {
    /// `MAX_THRESHOLD` bytes, polls every 10 s, `traders` traders.
    pub fn new(max_threshold: u64, traders: usize) -> AdvertiserConfig {
        AdvertiserConfig { poll_ns: 10 * crate::SECOND, max_threshold, traders }
    }
}

/// The server's state at a poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Memory committed on the node, to local domains and remote clients (bytes).
    pub committed: u64,
    /// Free memory (bytes).
    pub free: u64,
    /// Whether the server could commit CPU to another client (its own scheduling commitments
    /// against the local guarantees).
    pub cpu_committable: bool,
    /// The CPU the server could still commit, in any unit that grows with it.
    pub cpu: u64,
}

/// What a poll decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Committed memory is over `MAX_THRESHOLD` by this many bytes: revoke clients for them.
    Revoke(u64),
    /// The advert grew by 10% of `THRESHOLD`.
    Increase,
    /// The advert shrank by 5% of `THRESHOLD` (committed plus advertised was over it).
    Decrease,
    /// The advert backed off by 20% of `THRESHOLD` (free memory or CPU fell).
    BackOff,
    /// None of Fig 10.4's branches applied.
    Keep,
}

/// The result of a poll: the decision, the amount now advertised, and the traders to send it to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Poll {
    /// Which branch of Fig 10.4 was taken.
    pub decision: Decision,
    /// The memory advertised from now on (bytes).
    pub advert: u64,
    /// The traders (by index) the advert must be sent to now: bit `i` for trader `i`.
    pub send: u8,
}

impl Poll {
    /// Whether trader `i` must be sent the advert.
    pub fn sends_to(&self, i: usize) -> bool {
        i < 8 && self.send & (1 << i) != 0
    }
}

/// A server's advertising state; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct Advertiser {
    config: AdvertiserConfig,
    threshold: u64,
    advert: u64,
    prev: Option<Sample>,
    next_poll: u64,
    /// Traders to send to at the next poll whatever happens (they did not answer).
    resend: u8,
}

impl Advertiser {
    /// An advertiser whose first poll is due at `now`, advertising nothing yet.
    pub fn new(config: AdvertiserConfig, now: u64) -> Advertiser {
        let config = AdvertiserConfig { traders: config.traders.clamp(1, MAX_TRADERS), ..config };
        let threshold = config.max_threshold / 100 * 89 + config.max_threshold % 100 * 89 / 100;
        Advertiser { config, threshold, advert: 0, prev: None, next_poll: now, resend: 0 }
    }

    /// Its parameters.
    pub fn config(&self) -> AdvertiserConfig {
        self.config
    }

    /// `THRESHOLD` (89% of `MAX_THRESHOLD`).
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// `THRESHOLD + 10%`: committed plus advertised memory stays at or under it.
    pub fn ceiling(&self) -> u64 {
        self.threshold + self.step(10)
    }

    /// The memory a client may still be admitted for when `committed` bytes are committed:
    /// what keeps committed memory under the ceiling.
    pub fn room(&self, committed: u64) -> u64 {
        self.ceiling().saturating_sub(committed)
    }

    /// The memory advertised now (bytes).
    pub fn advert(&self) -> u64 {
        self.advert
    }

    /// When the next poll is due.
    pub fn next_poll(&self) -> u64 {
        self.next_poll
    }

    /// Whether a poll is due at `now`.
    pub fn due(&self, now: u64) -> bool {
        now >= self.next_poll
    }

    /// `percent`% of `THRESHOLD`.
    fn step(&self, percent: u64) -> u64 {
        self.threshold / 100 * percent + self.threshold % 100 * percent / 100
    }

    fn all_traders(&self) -> u8 {
        ((1u16 << self.config.traders) - 1) as u8
    }

    /// Runs Fig 10.4 on `now`'s sample; the next poll is due one period later.
    pub fn poll(&mut self, now: u64, s: Sample) -> Poll {
        let prev = self.prev.unwrap_or(s);
        self.prev = Some(s);
        self.next_poll = now.saturating_add(self.config.poll_ns);
        let before = self.advert;
        let decision = if s.committed > self.config.max_threshold {
            self.advert = 0;
            Decision::Revoke(s.committed - self.config.max_threshold)
        } else if s.committed <= self.threshold && s.free >= prev.free && s.cpu_committable {
            if s.committed.saturating_add(self.advert) <= self.threshold {
                self.advert = self.advert.saturating_add(self.step(10));
                Decision::Increase
            } else {
                self.advert = self.advert.saturating_sub(self.step(5));
                Decision::Decrease
            }
        } else if prev.free > s.free || prev.cpu > s.cpu {
            self.advert = self.advert.saturating_sub(self.step(20));
            Decision::BackOff
        } else {
            Decision::Keep
        };
        self.advert = self.advert.min(self.room(s.committed));
        let mut send = core::mem::take(&mut self.resend);
        if self.advert != before {
            send = self.all_traders();
        }
        Poll { decision, advert: self.advert, send }
    }

    /// Trader `i` did not answer the advert last sent to it: it is sent again at the next poll,
    /// changed or not.
    pub fn unreachable(&mut self, i: usize) {
        if i < self.config.traders {
            self.resend |= 1 << i;
        }
    }

    /// The server admitted a client for `bytes`: the advert backs off at once, by those bytes
    /// and the 20% step, and is to be sent to every trader now (the result).
    pub fn admitted(&mut self, bytes: u64) -> Poll {
        self.advert = self.advert.saturating_sub(bytes).saturating_sub(self.step(20));
        Poll { decision: Decision::BackOff, advert: self.advert, send: self.all_traders() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// MAX_THRESHOLD 100 MiB: THRESHOLD 89 MiB, the ceiling 97.9 MiB.
    fn advertiser() -> Advertiser {
        Advertiser::new(AdvertiserConfig::new(100 * MIB, 3), 0)
    }

    fn sample(committed: u64, free: u64) -> Sample {
        Sample { committed, free, cpu_committable: true, cpu: 100 }
    }

    #[test]
    fn thresholds() {
        let a = advertiser();
        assert_eq!(a.threshold(), 89 * MIB);
        assert_eq!(a.ceiling(), 89 * MIB + 89 * MIB / 10);
        assert_eq!(a.room(90 * MIB), a.ceiling() - 90 * MIB);
        assert_eq!(a.room(a.ceiling() + 1), 0);
        assert!(a.ceiling() < 100 * MIB);
        // Odd sizes round down without overflow.
        let b = Advertiser::new(AdvertiserConfig::new(u64::MAX, 1), 0);
        assert!(b.threshold() < u64::MAX && b.ceiling() > b.threshold());
    }

    #[test]
    fn grows_by_ten_percent_while_under_threshold() {
        let mut a = advertiser();
        let step = 89 * MIB / 10;
        let p = a.poll(0, sample(10 * MIB, 200 * MIB));
        assert_eq!((p.decision, p.advert, p.send), (Decision::Increase, step, 0b111));
        let p = a.poll(10, sample(10 * MIB, 200 * MIB));
        assert_eq!((p.decision, p.advert), (Decision::Increase, 2 * step));
        assert_eq!(a.next_poll(), 10 + 10 * crate::SECOND);
        assert!(!a.due(11) && a.due(10 + 10 * crate::SECOND));
    }

    #[test]
    fn shrinks_by_five_percent_over_threshold() {
        let mut a = advertiser();
        for i in 0..20 {
            a.poll(i, sample(40 * MIB, 200 * MIB));
        }
        // Grown until committed + advertised passed THRESHOLD, then 5% down, then 10% up...
        let p = a.poll(20, sample(40 * MIB, 200 * MIB));
        assert!(40 * MIB + p.advert <= a.ceiling(), "{}", p.advert);
        assert!(40 * MIB + p.advert + 89 * MIB / 10 > a.threshold());
        let before = a.advert();
        let p = a.poll(21, sample(40 * MIB, 200 * MIB));
        if 40 * MIB + before <= a.threshold() {
            assert_eq!((p.decision, p.advert), (Decision::Increase, before + 89 * MIB / 10));
        } else {
            assert_eq!((p.decision, p.advert), (Decision::Decrease, before - 89 * MIB / 20));
        }
    }

    #[test]
    fn decrease_branch_exactly() {
        let mut a = advertiser();
        // Grow to 5 steps (44.5 MiB) with nothing committed, then commit 50 MiB: 94.5 > 89.
        for i in 0..5 {
            a.poll(i, sample(0, 200 * MIB));
        }
        assert_eq!(a.advert(), 5 * (89 * MIB / 10));
        let p = a.poll(5, sample(45 * MIB, 200 * MIB));
        // 45 + 44.5 = 89.5 > 89: decrease by 5% (4.45 MiB), then clipped to the ceiling.
        assert_eq!(p.decision, Decision::Decrease);
        assert_eq!(p.advert, 5 * (89 * MIB / 10) - 89 * MIB / 20);
        assert_eq!(p.send, 0b111);
    }

    #[test]
    fn backs_off_when_free_memory_or_cpu_falls() {
        let mut a = advertiser();
        for i in 0..4 {
            a.poll(i, sample(10 * MIB, 200 * MIB));
        }
        let before = a.advert();
        // Free memory fell: not the growth branch; the back-off.
        let p = a.poll(4, sample(10 * MIB, 150 * MIB));
        assert_eq!((p.decision, p.advert), (Decision::BackOff, before - 89 * MIB / 5));
        // The CPU measure fell and the CPU is not committable: back-off again.
        let mut s = sample(10 * MIB, 150 * MIB);
        s.cpu = 50;
        s.cpu_committable = false;
        let p = a.poll(5, s);
        assert_eq!((p.decision, p.advert), (Decision::BackOff, 0));
        // Nothing fell and the CPU is still not committable: kept, nothing sent.
        let p = a.poll(6, s);
        assert_eq!((p.decision, p.advert, p.send), (Decision::Keep, 0, 0));
    }

    #[test]
    fn committed_above_threshold_backs_off_only_on_a_fall() {
        let mut a = advertiser();
        a.poll(0, sample(0, 200 * MIB));
        // Committed between THRESHOLD and MAX: neither growth nor revocation.
        let p = a.poll(1, sample(95 * MIB, 200 * MIB));
        assert_eq!(p.decision, Decision::Keep);
        // ... but the advert is clipped to the ceiling.
        assert_eq!(p.advert, a.ceiling() - 95 * MIB);
        let p = a.poll(2, sample(95 * MIB, 190 * MIB));
        assert_eq!((p.decision, p.advert), (Decision::BackOff, 0));
    }

    #[test]
    fn revokes_only_above_max_threshold() {
        let mut a = advertiser();
        a.poll(0, sample(0, 200 * MIB));
        // At MAX_THRESHOLD exactly: no revocation, the advert clipped to nothing.
        let p = a.poll(1, sample(100 * MIB, 200 * MIB));
        assert_eq!((p.decision, p.advert, p.send), (Decision::Keep, 0, 0b111));
        let p = a.poll(2, sample(100 * MIB + 4096, 200 * MIB));
        assert_eq!((p.decision, p.advert, p.send), (Decision::Revoke(4096), 0, 0));
        // Revoking withdraws an advert at once.
        let mut b = advertiser();
        b.poll(0, sample(0, 200 * MIB));
        let p = b.poll(1, sample(100 * MIB + 1, 100 * MIB));
        assert_eq!((p.decision, p.advert, p.send), (Decision::Revoke(1), 0, 0b111));
    }

    #[test]
    fn committed_plus_advertised_never_above_ceiling() {
        // Committed memory wandering up and down by hand-made steps.
        let mut a = advertiser();
        let walk = [0, 5, 30, 30, 80, 60, 89, 90, 97, 20, 20, 20, 50, 88, 88, 88, 3];
        for (i, c) in walk.iter().enumerate() {
            let committed = c * MIB;
            let p = a.poll(i as u64, sample(committed, 300 * MIB - committed));
            assert!(committed + p.advert <= a.ceiling(), "poll {i}: {c} MiB + {}", p.advert);
        }
    }

    #[test]
    fn admitting_within_room_never_revokes() {
        // Clients admitted up to the room, polls in between: never above MAX_THRESHOLD.
        let mut a = advertiser();
        let local = 30 * MIB;
        let mut remote = 0;
        for i in 0..40 {
            let p = a.poll(i, sample(local + remote, 256 * MIB - local - remote));
            assert!(!matches!(p.decision, Decision::Revoke(_)), "poll {i}");
            // A client asks for whatever is advertised plus a page: admitted within the room.
            let want = (p.advert + 4096).min(a.room(local + remote));
            if want > 0 {
                remote += want;
                a.admitted(want);
            }
        }
        assert!(local + remote <= a.ceiling());
        // A local domain starting up does make it revoke.
        assert!(remote > 0);
        let p = a.poll(41, sample(local + remote + 70 * MIB, 10 * MIB));
        assert!(matches!(p.decision, Decision::Revoke(n) if n > 0));
    }

    #[test]
    fn admission_backs_off_at_once() {
        let mut a = advertiser();
        for i in 0..5 {
            a.poll(i, sample(0, 200 * MIB));
        }
        let before = a.advert();
        let p = a.admitted(8 * MIB);
        assert_eq!(p.advert, before - 8 * MIB - 89 * MIB / 5);
        assert_eq!((p.decision, p.send), (Decision::BackOff, 0b111));
        assert_eq!(a.admitted(u64::MAX).advert, 0);
    }

    #[test]
    fn unreachable_trader_gets_the_advert_again() {
        let mut a = Advertiser::new(AdvertiserConfig::new(100 * MIB, 2), 0);
        let mut s = sample(95 * MIB, 100 * MIB);
        s.cpu_committable = false;
        let p = a.poll(0, s);
        assert_eq!((p.decision, p.send), (Decision::Keep, 0));
        a.unreachable(1);
        a.unreachable(2); // no such trader: ignored
        let p = a.poll(1, s);
        assert_eq!((p.decision, p.send), (Decision::Keep, 0b10));
        assert!(p.sends_to(1) && !p.sends_to(0) && !p.sends_to(2));
        // Sent once: not again unless it fails again.
        assert_eq!(a.poll(2, s).send, 0);
    }
}
