//! Which clients a server revokes when it needs memory back (Heracles §10.5).
//!
//! One victim is chosen by up to five rounds, each narrowing the candidates, and the choice is
//! repeated over the clients not chosen yet until the victims' memory covers what is needed:
//!
//! 1. **Least recently made contact**: clients silent for more than [`SILENT`] (60 s; twice
//!    that for a client without a local disk, which loses more by being revoked). If any, the
//!    one silent longest is the victim. This round also reclaims the memory of clients that
//!    gave up on the server or died (§10.7).
//! 2. **Diskless** clients leave the list (they have nowhere else to put their pages).
//! 3. Clients for which this server is a **mirror** are preferred (their primary still holds
//!    the pages).
//! 4. Clients with **extra-time-only** CPU (no guarantee) are preferred.
//! 5. The client holding the **most memory** (the pessimistic choice: more local demand is
//!    coming).
//!
//! A round that would leave no candidate leaves the list as it was (so a server with only
//! diskless clients still revokes one); a round that leaves exactly one makes it the victim.
//! Ties in round 5 go to the client that came first.

use alloc::vec::Vec;

use crate::ClientId;

/// How long a client may be silent before round 1 takes it (diskless clients: twice this).
pub const SILENT: u64 = 60 * crate::SECOND;

/// A client as victim choice sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its identity.
    pub id: ClientId,
    /// Memory it holds (bytes).
    pub memory: u64,
    /// Whether it has a local disk.
    pub has_disk: bool,
    /// Whether this server is its mirror.
    pub mirror: bool,
    /// Whether its CPU share is extra time only.
    pub extra_only: bool,
    /// When it last made contact.
    pub last_contact: u64,
}

/// A client chosen, and the round that chose it (1 to 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    /// The client.
    pub id: ClientId,
    /// The round that chose it.
    pub round: u8,
}

/// The clients to revoke at `now` so that at least `need` bytes come back, in the order
/// chosen; fewer than that if all of them hold less.
pub fn choose_victims(candidates: &[Candidate], now: u64, need: u64) -> Vec<Victim> {
    let mut left: Vec<Candidate> = candidates.to_vec();
    let mut victims = Vec::new();
    let mut freed = 0u64;
    while freed < need && !left.is_empty() {
        let v = choose_one(&left, now);
        let i = left.iter().position(|c| c.id == v.id).unwrap_or(0);
        freed = freed.saturating_add(left.remove(i).memory);
        victims.push(v);
    }
    victims
}

/// A round's filter: the candidates it keeps.
type Keep = fn(&Candidate) -> bool;

/// One victim among `list` (not empty) by the five rounds.
fn choose_one(list: &[Candidate], now: u64) -> Victim {
    // Round 1: silent too long (diskless: twice as long); the longest silent.
    let silent = |c: &&Candidate| {
        let limit = if c.has_disk { SILENT } else { 2 * SILENT };
        now.saturating_sub(c.last_contact) > limit
    };
    if let Some(c) = list.iter().filter(silent).min_by_key(|c| c.last_contact) {
        return Victim { id: c.id, round: 1 };
    }
    let mut list: Vec<&Candidate> = list.iter().collect();
    let rounds: [(u8, Keep); 3] = [(2, |c| c.has_disk), (3, |c| c.mirror), (4, |c| c.extra_only)];
    for (round, keep) in rounds {
        if list.iter().any(|c| keep(c)) {
            list.retain(|c| keep(c));
        }
        if list.len() == 1 {
            return Victim { id: list[0].id, round };
        }
    }
    // Round 5: the most memory, the first to come among equals.
    let most = list.iter().map(|c| c.memory).max().unwrap_or(0);
    let c = list.iter().find(|c| c.memory == most).unwrap_or(&list[0]);
    Victim { id: c.id, round: 5 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const S: u64 = crate::SECOND;
    const NOW: u64 = 1000 * S;

    /// A client with a disk, primary, guaranteed, heard from just now.
    fn c(id: ClientId, memory: u64) -> Candidate {
        Candidate {
            id,
            memory,
            has_disk: true,
            mirror: false,
            extra_only: false,
            last_contact: NOW,
        }
    }

    fn ids(v: &[Victim]) -> Vec<(ClientId, u8)> {
        v.iter().map(|v| (v.id, v.round)).collect()
    }

    #[test]
    fn round_1_the_longest_silent_diskless_counting_double() {
        let mut a = c(1, 10);
        a.last_contact = NOW - 61 * S;
        let mut b = c(2, 10);
        b.last_contact = NOW - 90 * S;
        let mut d = c(3, 10);
        d.has_disk = false;
        d.last_contact = NOW - 100 * S; // silent, but under 120 s: not yet
        assert_eq!(ids(&choose_victims(&[a, b, d], NOW, 1)), vec![(2, 1)]);
        d.last_contact = NOW - 121 * S;
        assert_eq!(ids(&choose_victims(&[a, b, d], NOW, 1)), vec![(3, 1)]);
        // Exactly 60 s is not over 60 s.
        a.last_contact = NOW - 60 * S;
        assert_eq!(ids(&choose_victims(&[a, c(4, 99)], NOW, 1)), vec![(4, 5)]);
    }

    #[test]
    fn round_2_drops_diskless_clients() {
        let mut a = c(1, 100);
        a.has_disk = false;
        let b = c(2, 10);
        assert_eq!(ids(&choose_victims(&[a, b], NOW, 1)), vec![(2, 2)]);
        // Only diskless clients: one is revoked all the same (the most memory).
        let mut d = c(3, 5);
        d.has_disk = false;
        assert_eq!(ids(&choose_victims(&[a, d], NOW, 1)), vec![(1, 5)]);
    }

    #[test]
    fn round_3_prefers_clients_this_server_mirrors() {
        let mut m = c(2, 10);
        m.mirror = true;
        assert_eq!(ids(&choose_victims(&[c(1, 100), m, c(3, 50)], NOW, 1)), vec![(2, 3)]);
    }

    #[test]
    fn round_4_prefers_extra_time_only_clients() {
        let mut m1 = c(1, 100);
        m1.mirror = true;
        let mut m2 = c(2, 10);
        m2.mirror = true;
        m2.extra_only = true;
        let mut x = c(3, 10);
        x.extra_only = true; // extra-time-only but not mirrored: round 3 removed it
        assert_eq!(ids(&choose_victims(&[m1, m2, x], NOW, 1)), vec![(2, 4)]);
    }

    #[test]
    fn round_5_the_most_memory_first_come_among_equals() {
        assert_eq!(ids(&choose_victims(&[c(1, 10), c(2, 30), c(3, 20)], NOW, 1)), vec![(2, 5)]);
        assert_eq!(ids(&choose_victims(&[c(1, 30), c(2, 30)], NOW, 1)), vec![(1, 5)]);
    }

    #[test]
    fn repeated_until_enough_is_freed() {
        let mut quiet = c(4, 5);
        quiet.last_contact = 0;
        let list = [c(1, 10), c(2, 30), c(3, 20), quiet];
        // 5 (silent) + 30 + 20 >= 50.
        assert_eq!(ids(&choose_victims(&list, NOW, 50)), vec![(4, 1), (2, 5), (3, 5)]);
        // Everything is not enough: all of them.
        assert_eq!(choose_victims(&list, NOW, 1000).len(), 4);
        assert!(choose_victims(&list, NOW, 0).is_empty());
        assert!(choose_victims(&[], NOW, 10).is_empty());
    }
}
