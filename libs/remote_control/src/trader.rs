//! A trader's table of adverts (Heracles §10.2).
//!
//! A trader keeps only current adverts, ordered by the memory they offer. A query for X bytes
//! is answered with up to [`MAX_ANSWER`] servers advertising at least X, the most memory first.
//! It takes no part in acquiring memory: a client asks the servers themselves, and each server
//! re-checks every request against its real commitments, so a stale advert costs a refusal,
//! never a wrong admission.
//!
//! An advert replaces the server's previous one; an advert of zero bytes withdraws it. An
//! advert lives [`TraderTable::lifetime`] (by default three of the servers' 10 s polls): a
//! server re-sends only when its advert changes or a trader missed it, so an advert unchanged
//! for that long is dropped and the server reappears at its next change. The table holds at
//! most its capacity of servers; a new server beyond it replaces the advert that expires first,
//! if that one offers less.

use alloc::vec::Vec;

/// The most servers one answer names.
pub const MAX_ANSWER: usize = 5;

/// How long an advert lives by default: three polls of 10 s.
pub const DEFAULT_LIFETIME: u64 = 30 * crate::SECOND;

/// One server's current advert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advert<A> {
    /// The server.
    pub server: A,
    /// The memory it advertises (bytes).
    pub bytes: u64,
    /// When the advert came.
    pub at: u64,
}

/// What [`TraderTable::advert`] did with an advert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// A new server's advert was added.
    Added,
    /// The server's advert was replaced.
    Replaced,
    /// The server withdrew its advert (zero bytes).
    Withdrawn,
    /// The table is full of larger, fresher adverts: this one was not kept.
    Full,
}

/// A trader's adverts; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct TraderTable<A> {
    /// Ordered by bytes, the most first; among equals, the newest first.
    adverts: Vec<Advert<A>>,
    capacity: usize,
    lifetime: u64,
}

impl<A: Copy + Eq> TraderTable<A> {
    /// A table of at most `capacity` servers whose adverts live `lifetime` ns.
    pub fn new(capacity: usize, lifetime: u64) -> TraderTable<A> {
        TraderTable { adverts: Vec::with_capacity(capacity), capacity, lifetime }
    }

    /// How long an advert lives.
    pub fn lifetime(&self) -> u64 {
        self.lifetime
    }

    /// The current adverts, the most memory first.
    pub fn adverts(&self) -> &[Advert<A>] {
        &self.adverts
    }

    /// How many servers advertise now.
    pub fn len(&self) -> usize {
        self.adverts.len()
    }

    /// Whether no server advertises.
    pub fn is_empty(&self) -> bool {
        self.adverts.is_empty()
    }

    /// Drops the adverts older than the lifetime at `now`: how many.
    pub fn expire(&mut self, now: u64) -> usize {
        let before = self.adverts.len();
        let lifetime = self.lifetime;
        self.adverts.retain(|a| now.saturating_sub(a.at) < lifetime);
        before - self.adverts.len()
    }

    /// `server` advertises `bytes` at `now`.
    pub fn advert(&mut self, now: u64, server: A, bytes: u64) -> Stored {
        self.expire(now);
        let old = self.adverts.iter().position(|a| a.server == server);
        if let Some(i) = old {
            self.adverts.remove(i);
        }
        if bytes == 0 {
            return Stored::Withdrawn;
        }
        if old.is_none() && self.adverts.len() >= self.capacity {
            // Replace the advert that would expire first, if it offers less.
            let Some((i, _)) = self
                .adverts
                .iter()
                .enumerate()
                .filter(|(_, a)| a.bytes < bytes)
                .min_by_key(|(_, a)| a.at)
            else {
                return Stored::Full;
            };
            self.adverts.remove(i);
        }
        let at = self.adverts.partition_point(|a| a.bytes > bytes);
        self.adverts.insert(at, Advert { server, bytes, at: now });
        if old.is_some() { Stored::Replaced } else { Stored::Added }
    }

    /// Up to [`MAX_ANSWER`] servers advertising at least `bytes` at `now`, the most memory
    /// first.
    pub fn query(&mut self, now: u64, bytes: u64) -> Vec<Advert<A>> {
        self.expire(now);
        self.adverts.iter().take_while(|a| a.bytes >= bytes).take(MAX_ANSWER).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const S: u64 = crate::SECOND;

    fn servers(answer: &[Advert<u32>]) -> Vec<u32> {
        answer.iter().map(|a| a.server).collect()
    }

    #[test]
    fn ordered_by_memory_and_answers_five_with_enough() {
        let mut t = TraderTable::new(16, DEFAULT_LIFETIME);
        for (server, mib) in [(1, 10), (2, 50), (3, 30), (4, 5), (5, 70), (6, 40), (7, 60)] {
            assert_eq!(t.advert(0, server, mib << 20), Stored::Added);
        }
        let order: Vec<u32> = t.adverts().iter().map(|a| a.server).collect();
        assert_eq!(order, vec![5, 7, 2, 6, 3, 1, 4]);
        assert_eq!(servers(&t.query(1, 20 << 20)), vec![5, 7, 2, 6, 3]);
        assert_eq!(servers(&t.query(1, 45 << 20)), vec![5, 7, 2]);
        assert_eq!(servers(&t.query(1, 5 << 20)).len(), MAX_ANSWER);
        assert!(t.query(1, 71 << 20).is_empty());
    }

    #[test]
    fn a_new_advert_replaces_and_zero_withdraws() {
        let mut t = TraderTable::new(16, DEFAULT_LIFETIME);
        t.advert(0, 1, 100);
        t.advert(0, 2, 200);
        assert_eq!(t.advert(1, 1, 300), Stored::Replaced);
        assert_eq!(servers(&t.query(2, 1)), vec![1, 2]);
        assert_eq!(t.advert(3, 1, 0), Stored::Withdrawn);
        assert_eq!(servers(&t.query(4, 1)), vec![2]);
        assert_eq!(t.advert(5, 9, 0), Stored::Withdrawn);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn stale_adverts_expire() {
        let mut t = TraderTable::new(16, 30 * S);
        t.advert(0, 1, 100);
        t.advert(10 * S, 2, 100);
        assert_eq!(t.query(30 * S - 1, 1).len(), 2);
        assert_eq!(servers(&t.query(30 * S, 1)), vec![2]);
        // A re-sent advert lives again from its arrival.
        t.advert(35 * S, 2, 100);
        assert_eq!(t.query(64 * S, 1).len(), 1);
        assert_eq!(t.expire(65 * S), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn a_full_table_keeps_the_larger_adverts() {
        let mut t = TraderTable::new(2, DEFAULT_LIFETIME);
        t.advert(0, 1, 100);
        t.advert(1, 2, 300);
        // Larger than the first (which expires first): replaces it.
        assert_eq!(t.advert(2, 3, 200), Stored::Added);
        assert_eq!(servers(&t.query(3, 1)), vec![2, 3]);
        // Smaller than both: not kept.
        assert_eq!(t.advert(4, 4, 50), Stored::Full);
        // A server already there may always change its advert.
        assert_eq!(t.advert(5, 3, 10), Stored::Replaced);
        assert_eq!(servers(&t.query(6, 1)), vec![2, 3]);
    }
}
