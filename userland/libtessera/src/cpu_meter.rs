//! Measuring the CPU a domain receives, from inside it, without trusting the kernel's accounts.
//!
//! A CPU-bound loop reads the clock on every iteration and feeds it to a [`CpuMeter`]. Two
//! readings closer than the meter's `gap` mean the domain ran in between; a longer step means
//! it was descheduled (or interrupted for that long). The meter adds up the running time per
//! *window*: consecutive intervals of a fixed length (normally the domain's CPU period) from
//! an epoch (normally the start of one of its periods), so a domain can check that it received
//! its slice in every period, to the resolution of the clock and the loop.
//!
//! A window's time is complete once a reading falls in a later window; the meter then hands it
//! out ([`CpuMeter::observe`] returns it) and adds it to the running [`WindowStats`], except
//! for the window the meter started in, which it saw only in part.

/// Summary of the complete windows a meter has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowStats {
    /// Complete windows seen.
    pub count: u64,
    /// The least running time in one window (0 if none).
    pub min: u64,
    /// The most running time in one window.
    pub max: u64,
    /// Running time summed over the complete windows.
    pub total: u64,
}

/// A complete window: its index from the epoch and the running time in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// `(start - epoch) / length`.
    pub index: u64,
    /// Running time seen in it, in clock units.
    pub got: u64,
}

/// Adds up running time per window from successive clock readings (all in the same unit,
/// e.g. nanoseconds).
#[derive(Clone, Debug)]
pub struct CpuMeter {
    epoch: u64,
    length: u64,
    gap: u64,
    last: u64,
    window: u64,
    got: u64,
    first_window: u64,
    excluded: Option<u64>,
    running_total: u64,
    stats: WindowStats,
}

impl CpuMeter {
    /// A meter whose windows are `length` long from `epoch` (at most `now`), that counts steps
    /// of at most `gap` as running, starting at reading `now`.
    pub fn new(epoch: u64, length: u64, gap: u64, now: u64) -> Self {
        let length = length.max(1);
        let window = now.saturating_sub(epoch) / length;
        CpuMeter {
            epoch,
            length,
            gap,
            last: now,
            window,
            got: 0,
            first_window: window,
            excluded: None,
            running_total: 0,
            stats: WindowStats::default(),
        }
    }

    /// Takes the next clock reading `now` (not before the previous one). Returns the window
    /// that this reading completed, if any (at most one per call: a step long enough to cross
    /// several windows was not running time, so the windows it skips are empty and are
    /// reported as such by the stats, not returned one by one).
    pub fn observe(&mut self, now: u64) -> Option<Window> {
        let step = now.saturating_sub(self.last);
        let running = step <= self.gap;
        let window = now.saturating_sub(self.epoch) / self.length;
        let mut done = None;
        if window != self.window {
            if running {
                // Split the step at the boundary of the new window.
                let boundary = self.epoch + window * self.length;
                self.got += boundary.saturating_sub(self.last);
                self.running_total += boundary.saturating_sub(self.last);
            }
            done = self.close();
            // Windows skipped entirely while descheduled were complete and empty.
            for _ in self.window + 1..window {
                self.record(0);
            }
            self.window = window;
            if running {
                let boundary = self.epoch + window * self.length;
                self.got = now - boundary;
                self.running_total += now - boundary;
            }
        } else if running {
            self.got += step;
            self.running_total += step;
        }
        self.last = now;
        done
    }

    fn close(&mut self) -> Option<Window> {
        let w = Window { index: self.window, got: self.got };
        self.got = 0;
        if w.index == self.first_window || self.excluded == Some(w.index) {
            return None;
        }
        self.record(w.got);
        Some(w)
    }

    fn record(&mut self, got: u64) {
        let s = &mut self.stats;
        s.min = if s.count == 0 { got } else { s.min.min(got) };
        s.max = s.max.max(got);
        s.count += 1;
        s.total += got;
    }

    /// Leaves the current window out of the stats: for a window in which the domain spent
    /// time on something other than its loop whose cost it cannot tell apart from being
    /// descheduled (a system call that prints, for example).
    pub fn exclude_current(&mut self) {
        self.excluded = Some(self.window);
    }

    /// The complete windows so far.
    pub fn stats(&self) -> WindowStats {
        self.stats
    }

    /// All running time seen, complete windows or not.
    pub fn running_total(&self) -> u64 {
        self.running_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Feeds readings every `step` while running, with the given descheduled intervals.
    fn feed(m: &mut CpuMeter, from: u64, to: u64, step: u64, off: &[(u64, u64)]) -> Vec<Window> {
        let mut out = Vec::new();
        let mut t = from;
        while t < to {
            t += step;
            if let Some(&(_, end)) = off.iter().find(|(a, b)| t > *a && t < *b) {
                t = end;
            }
            out.extend(m.observe(t));
        }
        out
    }

    #[test]
    fn a_domain_running_one_tenth_of_each_window() {
        // Window 100, runs [10k, 10k+10) of each, else descheduled.
        let mut m = CpuMeter::new(0, 100, 2, 0);
        let off: Vec<(u64, u64)> = (0..10).map(|k| (k * 100 + 10, (k + 1) * 100)).collect();
        let done = feed(&mut m, 0, 1000, 1, &off);
        assert_eq!(done.len(), 9);
        assert!(done.iter().all(|w| w.got == 10), "{done:?}");
        assert_eq!(m.stats(), WindowStats { count: 9, min: 10, max: 10, total: 90 });
    }

    #[test]
    fn the_first_partial_window_is_not_counted() {
        let mut m = CpuMeter::new(0, 100, 2, 50);
        let done = feed(&mut m, 50, 300, 1, &[]);
        assert_eq!(done.iter().map(|w| (w.index, w.got)).collect::<Vec<_>>(), [(1, 100), (2, 100)]);
        assert_eq!(m.stats().count, 2);
        assert_eq!(m.running_total(), 250);
    }

    #[test]
    fn skipped_windows_count_as_empty() {
        let mut m = CpuMeter::new(0, 100, 2, 0);
        feed(&mut m, 0, 150, 1, &[]);
        m.observe(450);
        m.observe(451);
        let s = m.stats();
        // Window 1 ran until 150, then nothing until 450 (window 4).
        assert_eq!(s.count, 3, "windows 1, 2 and 3 are complete");
        assert_eq!(s.min, 0);
        assert_eq!(s.max, 50);
    }

    #[test]
    fn an_excluded_window_is_left_out() {
        let mut m = CpuMeter::new(0, 100, 2, 0);
        feed(&mut m, 0, 150, 1, &[]);
        m.exclude_current();
        let done = feed(&mut m, 150, 400, 1, &[(160, 190)]);
        assert_eq!(done.iter().map(|w| w.index).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(m.stats(), WindowStats { count: 2, min: 100, max: 100, total: 200 });
    }

    #[test]
    fn a_running_step_across_a_boundary_is_split() {
        let mut m = CpuMeter::new(0, 100, 5, 0);
        assert_eq!(m.observe(98), None);
        assert_eq!(m.observe(102), None, "window 0 is where the meter started: partial");
        for t in (106..=198).step_by(4) {
            assert_eq!(m.observe(t), None);
        }
        assert_eq!(m.observe(203), Some(Window { index: 1, got: 100 }));
        assert_eq!(m.running_total(), 105, "the first step, 0 to 98, was too long to be running");
    }
}
