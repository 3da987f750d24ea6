//! How a remote paging client finds a server for more memory (Heracles §10.4).
//!
//! [`Selection`] is a small state machine without I/O: [`Selection::step`] says what to do
//! ([`Step`]), the caller does it and reports the outcome ([`Selection::trader_answered`],
//! [`Selection::server_answered`]), until the step is [`Step::Done`] or [`Step::GiveUp`].
//!
//! 1. Without load spreading (`spread=no`), the servers the client is already connected to are
//!    asked first to grow its reservation (`AddResources`). With spreading they are skipped
//!    (pages are spread over several servers), and dropped from the trader's candidates.
//! 2. The client's static servers (`servers=` in its spec, for tests) are tried next, then a
//!    trader is asked for candidates with enough memory; an unreachable trader is passed over
//!    for the next one.
//! 3. Each candidate is asked in turn (`CreateStream`); the first to admit the client is the
//!    answer.
//! 4. If all refuse, the trader is asked **once more** and its candidates tried again; if they
//!    refuse again the client gives up ([`Step::GiveUp`]: the backing store manager pages
//!    locally).
//! 5. If no trader is reachable: a client already connected to servers asks them to grow its
//!    reservation (if it has not yet); otherwise it gives up.
//!
//! Servers in the exclusion list (the one revoking the client, the one holding the pages a
//! mirror is wanted for) are never asked.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// What the client is to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<A> {
    /// Ask trader `i` (by the client's order) for servers with enough memory.
    AskTrader(usize),
    /// Ask this server to admit the client as a new client (`CreateStream`).
    Create(A),
    /// Ask this server, already holding pages of the client, for more memory (`AddResources`).
    Grow(A),
    /// This server gave the memory.
    Done(A),
    /// No server could be had: page locally.
    GiveUp,
}

/// One search for a server; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct Selection<A> {
    spread: bool,
    traders: usize,
    /// The trader asked now (the first reachable one).
    trader: usize,
    /// Answers had from traders.
    queries: u8,
    connected: Vec<A>,
    exclude: Vec<A>,
    grown: bool,
    queue: VecDeque<Step<A>>,
    current: Option<Step<A>>,
    /// Done or GiveUp, once reached.
    end: Option<Step<A>>,
}

impl<A: Copy + Eq> Selection<A> {
    /// A search with `traders` traders, the `statics` servers to try before them, the servers
    /// the client is `connected` to, and servers to `exclude`; spreading if `spread`.
    pub fn new(
        spread: bool,
        traders: usize,
        statics: &[A],
        connected: &[A],
        exclude: &[A],
    ) -> Selection<A> {
        let mut s = Selection {
            spread,
            traders,
            trader: 0,
            queries: 0,
            connected: connected.iter().copied().filter(|a| !exclude.contains(a)).collect(),
            exclude: exclude.to_vec(),
            grown: false,
            queue: VecDeque::new(),
            current: None,
            end: None,
        };
        if !spread {
            s.grow_all();
        }
        for a in statics {
            if !s.exclude.contains(a) && !s.connected.contains(a) {
                s.queue.push_back(Step::Create(*a));
            }
        }
        s
    }

    fn grow_all(&mut self) {
        self.grown = true;
        for a in &self.connected {
            self.queue.push_back(Step::Grow(*a));
        }
    }

    /// What to do now. Until the outcome of a [`Step::AskTrader`], [`Step::Create`] or
    /// [`Step::Grow`] is reported, the same step is returned again; once [`Step::Done`] or
    /// [`Step::GiveUp`], always that.
    pub fn step(&mut self) -> Step<A> {
        if let Some(step) = self.current.or(self.end) {
            return step;
        }
        if self.queue.is_empty() {
            if self.trader < self.traders && self.queries < 2 {
                self.queue.push_back(Step::AskTrader(self.trader));
            } else if self.trader >= self.traders && !self.grown && !self.connected.is_empty() {
                self.grow_all();
            }
        }
        let step = self.queue.pop_front().unwrap_or(Step::GiveUp);
        match step {
            Step::AskTrader(_) | Step::Create(_) | Step::Grow(_) => self.current = Some(step),
            Step::Done(_) | Step::GiveUp => self.end = Some(step),
        }
        step
    }

    /// The trader asked answered with `candidates` (most memory first), or, with `None`, did not
    /// answer.
    pub fn trader_answered(&mut self, candidates: Option<&[A]>) {
        if !matches!(self.current, Some(Step::AskTrader(_))) {
            return;
        }
        self.current = None;
        let Some(candidates) = candidates else {
            self.trader += 1;
            return;
        };
        self.queries += 1;
        for a in candidates {
            if self.exclude.contains(a) {
                continue;
            }
            if self.connected.contains(a) {
                // Spreading: drop it. Not spreading: it was asked to grow already.
                continue;
            }
            self.queue.push_back(Step::Create(*a));
        }
    }

    /// The server asked admitted the client (or grew its reservation) if `accepted`.
    pub fn server_answered(&mut self, accepted: bool) {
        let Some(Step::Create(a) | Step::Grow(a)) = self.current else {
            return;
        };
        self.current = None;
        if accepted {
            self.queue.clear();
            self.queue.push_back(Step::Done(a));
        }
    }

    /// Whether the search spreads over servers.
    pub fn spreads(&self) -> bool {
        self.spread
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Runs a search against `traders` (per trader: the answers to its queries, `None` for
    /// unreachable) and `admits` (servers that accept): the steps taken.
    fn run(mut s: Selection<u32>, traders: &[Option<&[u32]>], admits: &[u32]) -> Vec<Step<u32>> {
        let mut steps = vec![];
        for _ in 0..50 {
            let step = s.step();
            steps.push(step);
            match step {
                Step::AskTrader(i) => s.trader_answered(traders[i]),
                Step::Create(a) | Step::Grow(a) => s.server_answered(admits.contains(&a)),
                Step::Done(_) | Step::GiveUp => return steps,
            }
        }
        panic!("the search did not end: {steps:?}");
    }

    use Step::*;

    #[test]
    fn candidates_tried_in_turn() {
        let s = Selection::new(true, 1, &[], &[], &[]);
        let steps = run(s, &[Some(&[5, 6, 7])], &[6]);
        assert_eq!(steps, vec![AskTrader(0), Create(5), Create(6), Done(6)]);
        // Done is answered again.
        let mut s = Selection::new(true, 1, &[9], &[], &[]);
        assert_eq!(s.step(), Create(9));
        s.server_answered(true);
        assert_eq!((s.step(), s.step()), (Done(9), Done(9)));
        let mut s = Selection::<u32>::new(true, 0, &[], &[], &[]);
        assert_eq!((s.step(), s.step()), (GiveUp, GiveUp));
    }

    #[test]
    fn all_refuse_the_trader_is_asked_once_more_then_give_up() {
        let s = Selection::new(true, 1, &[], &[], &[]);
        let steps = run(s, &[Some(&[5, 6])], &[]);
        assert_eq!(
            steps,
            vec![AskTrader(0), Create(5), Create(6), AskTrader(0), Create(5), Create(6), GiveUp]
        );
    }

    #[test]
    fn static_servers_come_before_the_trader() {
        let s = Selection::new(true, 1, &[1, 2], &[], &[]);
        assert_eq!(run(s, &[Some(&[5])], &[2]), vec![Create(1), Create(2), Done(2)]);
        let s = Selection::new(true, 1, &[1], &[], &[]);
        assert_eq!(run(s, &[Some(&[5])], &[5]), vec![Create(1), AskTrader(0), Create(5), Done(5)]);
    }

    #[test]
    fn an_unreachable_trader_is_passed_over() {
        let s = Selection::new(true, 3, &[], &[], &[]);
        let steps = run(s, &[None, Some(&[4]), Some(&[8])], &[4]);
        assert_eq!(steps, vec![AskTrader(0), AskTrader(1), Create(4), Done(4)]);
        // None reachable and not connected: give up at once.
        let s = Selection::new(true, 2, &[], &[], &[]);
        assert_eq!(run(s, &[None, None], &[]), vec![AskTrader(0), AskTrader(1), GiveUp]);
        // No trader at all.
        let s = Selection::<u32>::new(true, 0, &[], &[], &[]);
        assert_eq!(run(s, &[], &[]), vec![GiveUp]);
    }

    #[test]
    fn no_trader_reachable_grows_an_existing_reservation() {
        let s = Selection::new(true, 1, &[], &[3], &[]);
        assert_eq!(run(s, &[None], &[3]), vec![AskTrader(0), Grow(3), Done(3)]);
        let s = Selection::new(true, 1, &[], &[3], &[]);
        assert_eq!(run(s, &[None], &[]), vec![AskTrader(0), Grow(3), GiveUp]);
    }

    #[test]
    fn spreading_drops_connected_candidates() {
        let s = Selection::new(true, 1, &[], &[5], &[]);
        let steps = run(s, &[Some(&[5, 6])], &[5, 6]);
        assert_eq!(steps, vec![AskTrader(0), Create(6), Done(6)]);
    }

    #[test]
    fn without_spreading_existing_servers_grow_first() {
        let s = Selection::new(false, 1, &[], &[5], &[]);
        assert_eq!(run(s, &[Some(&[5, 6])], &[5]), vec![Grow(5), Done(5)]);
        // Refused: the trader's other candidates, not the connected one again.
        let s = Selection::new(false, 1, &[], &[5], &[]);
        let steps = run(s, &[Some(&[5, 6])], &[6]);
        assert_eq!(steps, vec![Grow(5), AskTrader(0), Create(6), Done(6)]);
        // No trader reachable: not asked to grow twice.
        let s = Selection::new(false, 1, &[], &[5], &[]);
        assert_eq!(run(s, &[None], &[]), vec![Grow(5), AskTrader(0), GiveUp]);
    }

    #[test]
    fn excluded_servers_are_never_asked() {
        // The revoking server 5 is among the candidates, statics and connected.
        let s = Selection::new(false, 1, &[5], &[5], &[5]);
        let steps = run(s, &[Some(&[5, 6])], &[5, 6]);
        assert_eq!(steps, vec![AskTrader(0), Create(6), Done(6)]);
    }

    #[test]
    fn answers_out_of_turn_are_ignored() {
        let mut s = Selection::new(true, 1, &[], &[], &[]);
        s.server_answered(true);
        assert_eq!(s.step(), AskTrader(0));
        s.server_answered(true); // not a server step: ignored
        assert_eq!(s.step(), AskTrader(0));
        s.trader_answered(Some(&[1]));
        s.trader_answered(Some(&[2])); // nothing asked: ignored
        assert_eq!(s.step(), Create(1));
        assert!(s.spreads());
    }
}
