//! Shortest positioning time first, plain and aged.

use super::policy::{Full, Pending, Policy, Queue};
use super::positioning::Positioning;

/// Shortest positioning time first: the request the head reaches soonest, by the estimate
/// `P` (the oldest among equals).
#[derive(Clone, Debug)]
pub struct Sptf<P: Positioning> {
    queue: Queue,
    positioning: P,
}

impl<P: Positioning> Sptf<P> {
    /// For at most `capacity` pending requests, with the estimate `positioning`.
    pub fn new(capacity: usize, positioning: P) -> Sptf<P> {
        Sptf { queue: Queue::new(capacity), positioning }
    }
}

/// The request of `queue` the head at `head` reaches soonest by `p`.
fn nearest<P: Positioning>(queue: &Queue, p: &P, head: u64) -> Option<Pending> {
    queue.min_by_key(|r| p.positioning_ns(head, r.lbn))
}

impl<P: Positioning> Policy for Sptf<P> {
    fn enqueue(&mut self, r: Pending) -> Result<(), Full> {
        self.queue.push(r)
    }

    fn choose(&self, head: u64, _now_ns: u64) -> Option<Pending> {
        nearest(&self.queue, &self.positioning, head)
    }

    fn dequeue(&mut self, id: u64, _now_ns: u64) -> Option<Pending> {
        self.queue.remove(id)
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}

/// SPTF with a bound on every request's wait: a request pending for `max_wait_ns` or more is
/// served before any other (the oldest such first); otherwise SPTF. The prototype's setting
/// was a bound of one second, within 1% of SPTF's throughput.
///
/// With *turns* ([`AgedSptf::with_turns`]), a request served because of its age opens a turn
/// of `turn_ns` in which no other is served for its age: the client it belongs to keeps the
/// disk while SPTF (and anticipation) prefer it, and the next old request waits for the turn
/// to end. Without turns, when several clients' requests pass the bound together each gets one
/// request in turn, and the disk seeks between them at every request; with turns, clients
/// take the disk in turns, one seek a turn. A request's wait is then bounded by the bound plus
/// a turn for each client ahead of it.
#[derive(Clone, Debug)]
pub struct AgedSptf<P: Positioning> {
    queue: Queue,
    positioning: P,
    max_wait_ns: u64,
    turn_ns: u64,
    /// When the current turn ends.
    turn_end_ns: u64,
}

impl<P: Positioning> AgedSptf<P> {
    /// For at most `capacity` pending requests, with the estimate `positioning`, no request
    /// waiting `max_wait_ns` or more while a younger one is served.
    pub fn new(capacity: usize, positioning: P, max_wait_ns: u64) -> AgedSptf<P> {
        AgedSptf {
            queue: Queue::new(capacity),
            positioning,
            max_wait_ns,
            turn_ns: 0,
            turn_end_ns: 0,
        }
    }

    /// As [`AgedSptf::new`], a request served for its age opening a turn of `turn_ns`.
    pub fn with_turns(capacity: usize, positioning: P, max_wait_ns: u64, turn_ns: u64) -> Self {
        AgedSptf { turn_ns, ..AgedSptf::new(capacity, positioning, max_wait_ns) }
    }

    /// The oldest request, if it has waited the bound and no turn is running at `now_ns`.
    fn overdue(&self, now_ns: u64) -> Option<Pending> {
        self.queue.first().filter(|oldest| {
            now_ns >= self.turn_end_ns
                && now_ns.saturating_sub(oldest.arrival_ns) >= self.max_wait_ns
        })
    }

    /// What plain SPTF would choose: the anticipation heuristic of Aged-SPTF never waits when
    /// the aged choice differs from it.
    pub fn sptf_choice(&self, head: u64) -> Option<Pending> {
        nearest(&self.queue, &self.positioning, head)
    }
}

impl<P: Positioning> Policy for AgedSptf<P> {
    fn enqueue(&mut self, r: Pending) -> Result<(), Full> {
        self.queue.push(r)
    }

    fn choose(&self, head: u64, now_ns: u64) -> Option<Pending> {
        // The queue is in arrival order: the first request is the oldest.
        self.overdue(now_ns).or_else(|| self.sptf_choice(head))
    }

    fn dequeue(&mut self, id: u64, now_ns: u64) -> Option<Pending> {
        if self.overdue(now_ns).is_some_and(|r| r.id == id) {
            self.turn_end_ns = now_ns + self.turn_ns;
        }
        self.queue.remove(id)
    }

    fn len(&self) -> usize {
        self.queue.len()
    }
}
