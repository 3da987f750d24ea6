//! A paging server's admission control and its record of clients (Heracles §10.3, §10.6).
//!
//! A **new** client asks for memory, a share of the server's CPU (its processing time per
//! period, here in parts per million of the server's CPU) and a share of its network link (parts
//! per million of link time); it is admitted only if all three fit beside what is already
//! committed. An **existing** client asking for more memory (`AddResources`, which skips the
//! trader) is checked against memory only, as its CPU and network were agreed when it came.
//! The memory a request may take (`room`) is the caller's: the [`crate::Advertiser`]'s room
//! under its ceiling, so that admitting never pushes the node over `MAX_THRESHOLD`.
//!
//! The record of each client also holds what victim choice needs ([`crate::victim`]): when it
//! last made contact, whether it has a local disk, whether this server is its primary or its
//! mirror, and whether its CPU share is guaranteed or extra time only.

use alloc::vec::Vec;

use crate::ClientId;
use crate::victim::Candidate;

/// One million: a whole CPU or a whole link, in parts per million.
pub const WHOLE: u32 = 1_000_000;

/// What this server is to a client (told by the client, §10.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// It holds the client's pages.
    Primary,
    /// It holds a mirror of pages another server holds.
    Mirror,
}

/// What a client asks for when it first comes (`CreateStream`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Memory (bytes).
    pub memory: u64,
    /// Processing time at the server, parts per million of its CPU.
    pub cpu_ppm: u32,
    /// Link time, parts per million of the server's link.
    pub net_ppm: u32,
    /// Whether the client has a local disk to fall back on.
    pub has_disk: bool,
    /// What this server is to it.
    pub role: Role,
    /// Whether its CPU share is guaranteed (false: extra time only).
    pub guaranteed: bool,
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not enough memory within the room.
    Memory,
    /// The server's CPU is committed.
    Cpu,
    /// The server's link is committed.
    Network,
    /// A new client with an identity already admitted.
    Duplicate,
    /// More memory for a client the server does not have.
    UnknownClient,
    /// The server keeps no more clients.
    TooManyClients,
}

/// What a server knows of one admitted client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientRecord {
    /// Its identity.
    pub id: ClientId,
    /// Memory committed to it (bytes).
    pub memory: u64,
    /// Its CPU share (ppm).
    pub cpu_ppm: u32,
    /// Its link share (ppm).
    pub net_ppm: u32,
    /// Whether it has a local disk.
    pub has_disk: bool,
    /// What this server is to it.
    pub role: Role,
    /// Whether its CPU share is guaranteed.
    pub guaranteed: bool,
    /// When it last made contact.
    pub last_contact: u64,
}

/// A server's admitted clients and their commitments; see the [module](self) documentation.
#[derive(Clone, Debug)]
pub struct Admission {
    cpu_capacity: u32,
    net_capacity: u32,
    max_clients: usize,
    clients: Vec<ClientRecord>,
}

impl Admission {
    /// A server that commits at most `cpu_capacity` ppm of its CPU and `net_capacity` ppm of
    /// its link to clients, and keeps at most `max_clients`.
    pub fn new(cpu_capacity: u32, net_capacity: u32, max_clients: usize) -> Admission {
        Admission {
            cpu_capacity: cpu_capacity.min(WHOLE),
            net_capacity: net_capacity.min(WHOLE),
            max_clients,
            clients: Vec::new(),
        }
    }

    /// The clients, in the order they came.
    pub fn clients(&self) -> &[ClientRecord] {
        &self.clients
    }

    /// Client `id`'s record.
    pub fn client(&self, id: ClientId) -> Option<&ClientRecord> {
        self.clients.iter().find(|c| c.id == id)
    }

    /// Memory committed to clients (bytes).
    pub fn memory(&self) -> u64 {
        self.clients.iter().map(|c| c.memory).sum()
    }

    /// CPU committed to clients (ppm).
    pub fn cpu(&self) -> u32 {
        self.clients.iter().map(|c| c.cpu_ppm).sum()
    }

    /// Link time committed to clients (ppm).
    pub fn net(&self) -> u32 {
        self.clients.iter().map(|c| c.net_ppm).sum()
    }

    /// CPU the server could still commit (ppm).
    pub fn cpu_free(&self) -> u32 {
        self.cpu_capacity.saturating_sub(self.cpu())
    }

    /// Whether a new client `id` asking `req` would be admitted with `room` bytes of memory.
    pub fn check_new(&self, id: ClientId, req: &Request, room: u64) -> Result<(), Refusal> {
        if self.client(id).is_some() {
            return Err(Refusal::Duplicate);
        }
        if self.clients.len() >= self.max_clients {
            return Err(Refusal::TooManyClients);
        }
        if req.memory > room {
            return Err(Refusal::Memory);
        }
        if u64::from(self.cpu()) + u64::from(req.cpu_ppm) > u64::from(self.cpu_capacity) {
            return Err(Refusal::Cpu);
        }
        if u64::from(self.net()) + u64::from(req.net_ppm) > u64::from(self.net_capacity) {
            return Err(Refusal::Network);
        }
        Ok(())
    }

    /// Admits new client `id` at `now` if [`check_new`](Admission::check_new) allows.
    pub fn admit(
        &mut self,
        now: u64,
        id: ClientId,
        req: &Request,
        room: u64,
    ) -> Result<(), Refusal> {
        self.check_new(id, req, room)?;
        self.clients.push(ClientRecord {
            id,
            memory: req.memory,
            cpu_ppm: req.cpu_ppm,
            net_ppm: req.net_ppm,
            has_disk: req.has_disk,
            role: req.role,
            guaranteed: req.guaranteed,
            last_contact: now,
        });
        Ok(())
    }

    /// Gives existing client `id` `bytes` more memory at `now`, checked against memory only.
    pub fn add_memory(
        &mut self,
        now: u64,
        id: ClientId,
        bytes: u64,
        room: u64,
    ) -> Result<(), Refusal> {
        let c = self.clients.iter_mut().find(|c| c.id == id).ok_or(Refusal::UnknownClient)?;
        if bytes > room {
            return Err(Refusal::Memory);
        }
        c.memory = c.memory.saturating_add(bytes);
        c.last_contact = now;
        Ok(())
    }

    /// Client `id` made contact at `now` (any request of its own).
    pub fn contact(&mut self, id: ClientId, now: u64) {
        if let Some(c) = self.clients.iter_mut().find(|c| c.id == id) {
            c.last_contact = c.last_contact.max(now);
        }
    }

    /// Forgets client `id`: its record, if it had one.
    pub fn release(&mut self, id: ClientId) -> Option<ClientRecord> {
        let i = self.clients.iter().position(|c| c.id == id)?;
        Some(self.clients.remove(i))
    }

    /// The clients as victim choice sees them.
    pub fn candidates(&self) -> Vec<Candidate> {
        self.clients.iter().map(Candidate::from).collect()
    }
}

impl From<&ClientRecord> for Candidate {
    fn from(c: &ClientRecord) -> Candidate {
        Candidate {
            id: c.id,
            memory: c.memory,
            has_disk: c.has_disk,
            mirror: c.role == Role::Mirror,
            extra_only: !c.guaranteed,
            last_contact: c.last_contact,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(memory: u64, cpu_ppm: u32, net_ppm: u32) -> Request {
        Request { memory, cpu_ppm, net_ppm, has_disk: true, role: Role::Primary, guaranteed: true }
    }

    #[test]
    fn a_new_client_is_checked_against_memory_cpu_and_network() {
        let mut a = Admission::new(500_000, 400_000, 8);
        assert_eq!(a.admit(0, 1, &req(100, 300_000, 100_000), 1000), Ok(()));
        assert_eq!(a.check_new(2, &req(1001, 0, 0), 1000), Err(Refusal::Memory));
        assert_eq!(a.check_new(2, &req(100, 200_001, 0), 1000), Err(Refusal::Cpu));
        assert_eq!(a.check_new(2, &req(100, 200_000, 300_001), 1000), Err(Refusal::Network));
        assert_eq!(a.admit(1, 2, &req(1000, 200_000, 300_000), 1000), Ok(()));
        assert_eq!((a.memory(), a.cpu(), a.net(), a.cpu_free()), (1100, 500_000, 400_000, 0));
        assert_eq!(a.check_new(3, &req(0, 1, 0), u64::MAX), Err(Refusal::Cpu));
        assert_eq!(a.check_new(3, &req(0, 0, 1), u64::MAX), Err(Refusal::Network));
        assert_eq!(a.check_new(1, &req(0, 0, 0), u64::MAX), Err(Refusal::Duplicate));
    }

    #[test]
    fn more_memory_for_an_existing_client_is_checked_against_memory_only() {
        let mut a = Admission::new(100_000, 100_000, 8);
        a.admit(0, 1, &req(100, 100_000, 100_000), 1000).unwrap();
        // CPU and link are full, yet more memory is granted within the room.
        assert_eq!(a.add_memory(5, 1, 500, 500), Ok(()));
        assert_eq!(a.client(1).unwrap().memory, 600);
        assert_eq!(a.client(1).unwrap().last_contact, 5);
        assert_eq!(a.add_memory(6, 1, 501, 500), Err(Refusal::Memory));
        assert_eq!(a.add_memory(6, 9, 1, 500), Err(Refusal::UnknownClient));
        // A new client is refused for the CPU, with plenty of room.
        assert_eq!(a.check_new(2, &req(1, 1, 0), 1000), Err(Refusal::Cpu));
    }

    #[test]
    fn release_and_limits() {
        let mut a = Admission::new(WHOLE, WHOLE, 2);
        a.admit(0, 1, &req(10, 1, 1), 100).unwrap();
        a.admit(0, 2, &req(10, 1, 1), 100).unwrap();
        assert_eq!(a.check_new(3, &req(1, 0, 0), 100), Err(Refusal::TooManyClients));
        assert_eq!(a.release(1).map(|c| c.id), Some(1));
        assert_eq!(a.release(1), None);
        assert_eq!(a.admit(0, 3, &req(1, 0, 0), 100), Ok(()));
        a.contact(3, 50);
        a.contact(3, 40);
        assert_eq!(a.client(3).unwrap().last_contact, 50);
        assert_eq!(a.candidates().len(), 2);
    }
}
