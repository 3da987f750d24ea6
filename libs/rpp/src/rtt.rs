//! Round-trip timing: [`RttEstimator`], Jacobson/Karels smoothed round trip and variance, the
//! retransmission timeout from them, Karn's rule and exponential backoff.

/// The estimator's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttConfig {
    /// The timeout before any sample, in nanoseconds.
    pub initial_rto_ns: u64,
    /// The smallest timeout, in nanoseconds.
    pub min_rto_ns: u64,
    /// The largest timeout, backoff included, in nanoseconds.
    pub max_rto_ns: u64,
}

impl RttConfig {
    /// 100 ms at first, between 2 ms and 2 s (a LAN; the thesis's Ethernet).
    pub const LAN: RttConfig =
        RttConfig { initial_rto_ns: 100_000_000, min_rto_ns: 2_000_000, max_rto_ns: 2_000_000_000 };
}

impl Default for RttConfig {
    fn default() -> RttConfig {
        RttConfig::LAN
    }
}

/// One peer's round-trip estimate (RFC 6298's algorithm, in nanoseconds):
/// on the first sample `R`, SRTT = R and RTTVAR = R/2; then RTTVAR = 3/4 RTTVAR + 1/4 |SRTT − R|
/// and SRTT = 7/8 SRTT + 1/8 R; RTO = SRTT + 4 RTTVAR, clamped to the configured bounds.
///
/// Karn's rule is the caller's: it samples only operations that were never retransmitted
/// ([`crate::client::Transfer`] does). A timeout's backoff doubles the RTO per attempt
/// ([`RttEstimator::rto_backoff`]) without touching the estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttEstimator {
    config: RttConfig,
    /// Smoothed round trip and its variance, once sampled.
    estimate: Option<(u64, u64)>,
}

impl RttEstimator {
    /// An estimator without samples (its RTO is the initial one).
    pub fn new(config: RttConfig) -> RttEstimator {
        RttEstimator { config, estimate: None }
    }

    /// Adds a round-trip sample (from an operation that was never retransmitted).
    pub fn sample(&mut self, rtt_ns: u64) {
        self.estimate = Some(match self.estimate {
            None => (rtt_ns, rtt_ns / 2),
            Some((srtt, rttvar)) => {
                let rttvar = rttvar - rttvar / 4 + srtt.abs_diff(rtt_ns) / 4;
                let srtt = srtt - srtt / 8 + rtt_ns / 8;
                (srtt, rttvar)
            }
        });
    }

    /// The smoothed round trip, once sampled.
    pub fn srtt(&self) -> Option<u64> {
        self.estimate.map(|(s, _)| s)
    }

    /// The round-trip variance, once sampled.
    pub fn rttvar(&self) -> Option<u64> {
        self.estimate.map(|(_, v)| v)
    }

    /// The retransmission timeout: SRTT + 4 RTTVAR (the initial one before any sample),
    /// clamped to the configured bounds.
    pub fn rto(&self) -> u64 {
        let rto = match self.estimate {
            None => self.config.initial_rto_ns,
            Some((srtt, rttvar)) => srtt.saturating_add(rttvar.saturating_mul(4)),
        };
        rto.clamp(self.config.min_rto_ns, self.config.max_rto_ns.max(self.config.min_rto_ns))
    }

    /// The timeout after `attempts` timeouts in a row: the RTO doubled that many times,
    /// at most the configured maximum.
    pub fn rto_backoff(&self, attempts: u32) -> u64 {
        let max = self.config.max_rto_ns.max(self.config.min_rto_ns);
        let mut t = self.rto();
        for _ in 0..attempts {
            if t >= max {
                break;
            }
            t = t.saturating_mul(2);
        }
        t.min(max)
    }

    /// The configuration.
    pub fn config(&self) -> RttConfig {
        self.config
    }
}
