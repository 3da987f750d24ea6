//! CPU contracts and admission control.

/// Nanoseconds: every time in this crate (instants since boot and durations).
pub type Nanos = u64;

/// One microsecond in [`Nanos`].
pub const MICROSECOND: Nanos = 1_000;
/// One millisecond in [`Nanos`].
pub const MILLISECOND: Nanos = 1_000_000;
/// One second in [`Nanos`].
pub const SECOND: Nanos = 1_000_000_000;

/// The shortest period a contract may have (100 µs): below it the kernel's own switching cost
/// (about a microsecond per switch) becomes a visible part of every period.
pub const MIN_PERIOD: Nanos = 100 * MICROSECOND;
/// The longest period a contract may have (10 s).
pub const MAX_PERIOD: Nanos = 10 * SECOND;
/// The shortest slice a contract may have (10 µs).
pub const MIN_SLICE: Nanos = 10 * MICROSECOND;
/// The shortest latency hint (10 µs).
pub const MIN_LATENCY: Nanos = 10 * MICROSECOND;

/// The share of the CPU the kernel keeps for itself, in percent: traps, switches, timer
/// interrupts and the activations' entry paths are charged to the domain that is running, but
/// time spent when no domain runs (idle wake-ups, the kernel's own reports) is not. Admission
/// keeps the sum of all `slice / period` within `1 - KERNEL_RESERVE_PERCENT / 100`.
pub const KERNEL_RESERVE_PERCENT: u64 = 10;

/// Parts per billion: shares of the CPU are computed in these to stay exact enough without
/// floating point (`slice / period` rounded up, so admission errs on the safe side).
pub const PPB: u64 = 1_000_000_000;

/// The most the admitted contracts may sum to, in parts per billion.
pub const CAPACITY_PPB: u64 = PPB / 100 * (100 - KERNEL_RESERVE_PERCENT);

/// A domain's CPU contract: in every `period` it receives `slice` of CPU time; with `extra` it
/// may also run in slack time nobody has contracted; `latency` is how soon it should run after
/// it is woken (see the crate documentation for how each is used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Contract {
    /// The length of each period.
    pub period: Nanos,
    /// The CPU time guaranteed in each period.
    pub slice: Nanos,
    /// Whether the domain may use slack time beyond its slice.
    pub extra: bool,
    /// The latency hint: a woken domain with slice left runs within this much of its wake-up.
    pub latency: Nanos,
}

/// Why a [`Contract`] is not acceptable by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ContractError {
    /// `period` is zero.
    ZeroPeriod,
    /// `slice` is zero.
    ZeroSlice,
    /// `latency` is zero.
    ZeroLatency,
    /// `period` is below [`MIN_PERIOD`].
    PeriodTooShort,
    /// `period` is above [`MAX_PERIOD`].
    PeriodTooLong,
    /// `slice` is below [`MIN_SLICE`].
    SliceTooShort,
    /// `slice` is longer than `period`.
    SliceExceedsPeriod,
    /// `latency` is below [`MIN_LATENCY`].
    LatencyTooShort,
    /// `latency` is above [`MAX_PERIOD`].
    LatencyTooLong,
}

impl ContractError {
    /// A sentence saying what is wrong, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            ContractError::ZeroPeriod => "period must be more than zero",
            ContractError::ZeroSlice => "slice must be more than zero",
            ContractError::ZeroLatency => "latency must be more than zero",
            ContractError::PeriodTooShort => "period is shorter than the minimum of 100us",
            ContractError::PeriodTooLong => "period is longer than the maximum of 10s",
            ContractError::SliceTooShort => "slice is shorter than the minimum of 10us",
            ContractError::SliceExceedsPeriod => "slice is longer than the period",
            ContractError::LatencyTooShort => "latency is shorter than the minimum of 10us",
            ContractError::LatencyTooLong => "latency is longer than the maximum of 10s",
        }
    }
}

impl core::fmt::Display for ContractError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.describe())
    }
}

impl Contract {
    /// The contract of a domain whose manifest names none: 1 ms every 100 ms (1%), slack time
    /// allowed, a 10 ms latency hint. A best-effort domain, in other words.
    pub const BEST_EFFORT: Contract = Contract {
        period: 100 * MILLISECOND,
        slice: MILLISECOND,
        extra: true,
        latency: 10 * MILLISECOND,
    };

    /// Checks the contract by itself (not against others: see [`admit`]).
    pub fn validate(&self) -> Result<(), ContractError> {
        use ContractError::*;
        match () {
            _ if self.period == 0 => Err(ZeroPeriod),
            _ if self.slice == 0 => Err(ZeroSlice),
            _ if self.latency == 0 => Err(ZeroLatency),
            _ if self.period < MIN_PERIOD => Err(PeriodTooShort),
            _ if self.period > MAX_PERIOD => Err(PeriodTooLong),
            _ if self.slice > self.period => Err(SliceExceedsPeriod),
            _ if self.slice < MIN_SLICE => Err(SliceTooShort),
            _ if self.latency < MIN_LATENCY => Err(LatencyTooShort),
            _ if self.latency > MAX_PERIOD => Err(LatencyTooLong),
            _ => Ok(()),
        }
    }

    /// `slice / period` in parts per billion, rounded up (0 for a zero period):
    /// [`crate::policy::share_ppb`].
    pub fn share_ppb(&self) -> u64 {
        crate::policy::share_ppb(self)
    }
}

/// Why a set of contracts cannot be admitted together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AdmissionError {
    /// Contract `index` is invalid by itself.
    Invalid {
        /// Its position in the list given to [`admit`].
        index: usize,
        /// What is wrong with it.
        error: ContractError,
    },
    /// Adding contract `index` takes the sum of shares over [`CAPACITY_PPB`].
    OverCapacity {
        /// The first contract (in list order) that does not fit.
        index: usize,
        /// The sum of shares up to and including it, in parts per billion.
        total_ppb: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit;

    fn c(period_ms: u64, slice_ms: u64) -> Contract {
        Contract {
            period: period_ms * MILLISECOND,
            slice: slice_ms * MILLISECOND,
            extra: false,
            latency: MILLISECOND,
        }
    }

    #[test]
    fn validation_names_each_problem() {
        let ok = c(10, 2);
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(Contract { period: 0, ..ok }.validate(), Err(ContractError::ZeroPeriod));
        assert_eq!(Contract { slice: 0, ..ok }.validate(), Err(ContractError::ZeroSlice));
        assert_eq!(Contract { latency: 0, ..ok }.validate(), Err(ContractError::ZeroLatency));
        assert_eq!(c(10, 11).validate(), Err(ContractError::SliceExceedsPeriod));
        assert_eq!(c(10, 10).validate(), Ok(()), "a slice may fill its period");
        let tiny = Contract { period: MIN_PERIOD - 1, slice: MIN_SLICE, ..ok };
        assert_eq!(tiny.validate(), Err(ContractError::PeriodTooShort));
        let long = Contract { period: MAX_PERIOD + 1, ..ok };
        assert_eq!(long.validate(), Err(ContractError::PeriodTooLong));
        let thin = Contract { slice: MIN_SLICE - 1, ..ok };
        assert_eq!(thin.validate(), Err(ContractError::SliceTooShort));
        let quick = Contract { latency: MIN_LATENCY - 1, ..ok };
        assert_eq!(quick.validate(), Err(ContractError::LatencyTooShort));
        let slow = Contract { latency: MAX_PERIOD + 1, ..ok };
        assert_eq!(slow.validate(), Err(ContractError::LatencyTooLong));
        assert_eq!(Contract::BEST_EFFORT.validate(), Ok(()));
    }

    #[test]
    fn shares_round_up() {
        assert_eq!(c(10, 1).share_ppb(), 100_000_000);
        let third = Contract { period: 3, slice: 1, ..c(1, 1) };
        assert_eq!(third.share_ppb(), 333_333_334);
        assert_eq!(c(10, 10).share_ppb(), PPB);
    }

    #[test]
    fn admission_up_to_the_reserve() {
        let fits = [c(10, 1), c(10, 2), c(10, 5)];
        assert_eq!(admit(&fits), Ok(800_000_000));
        let mixed = [c(5, 1), c(100, 10), c(50, 15)];
        assert_eq!(admit(&mixed), Ok(600_000_000));
        let exactly = [c(10, 5), c(10, 4)];
        assert_eq!(admit(&exactly), Ok(CAPACITY_PPB));
        let over = [c(10, 5), c(10, 3), c(100, 11)];
        assert_eq!(
            admit(&over),
            Err(AdmissionError::OverCapacity { index: 2, total_ppb: 910_000_000 })
        );
        let invalid = [c(10, 1), c(10, 20)];
        assert_eq!(
            admit(&invalid),
            Err(AdmissionError::Invalid { index: 1, error: ContractError::SliceExceedsPeriod })
        );
        assert_eq!(admit(&[]), Ok(0));
    }

    #[test]
    fn best_effort_domains_fill_a_full_manifest() {
        let many = [Contract::BEST_EFFORT; 64];
        assert!(admit(&many).is_ok(), "64 best-effort domains must be admitted");
    }
}
