//! What the kernel reports of the domains beyond the moment: a fault's report as the kernel
//! terminates a domain for it, and the run summary at the end of the run, with the state kept
//! for it since boot ([`Reports`]).

use abi::PAGE_SIZE;

use crate::contract::UserFault;
use crate::domain::DomainId;
use crate::domains::Domains;
use crate::stretch::{Kind, Stretches};
use crate::{Ending, Platform, clock};

/// The state kept for the run summary, owned by [`crate::World`].
pub(crate) struct Reports {
    /// Free frames before the first domain was created.
    free_before: u64,
    /// Bytes of the kernel heap in use once every domain was made (see [`crate::kmem`]).
    boot_heap: usize,
}

impl Reports {
    /// Nothing to report yet: `free_before` frames are free before the first domain is made.
    pub(crate) const fn new(free_before: u64) -> Self {
        Reports { free_before, boot_heap: 0 }
    }

    /// The domains are made: the kernel heap holds this much for good.
    pub(crate) fn domains_made(&mut self, heap_used: usize) {
        self.boot_heap = heap_used;
    }

    /// The run summary, at the end of the run: how each domain ended, its CPU accounts, its
    /// page faults, and the frames and kernel heap against what they were at boot; `idle_ticks`
    /// is the time the CPU idled, `cpu` the scheduler's contracts and accounts.
    pub(crate) fn summary<P: Platform>(
        &self,
        domains: &Domains<P>,
        idle_ticks: u64,
        cpu: &atropos::Atropos,
    ) {
        info!("run summary: {=usize} domain(s)", domains.len());
        info!(
            "  kernel: idle {=u64} ns of {=u64} ns since boot",
            clock::ns_from_ticks::<P>(idle_ticks),
            clock::ns_from_ticks::<P>(P::now_ticks())
        );
        for d in domains.records() {
            match d.ending {
                Some(Ending::Exited(code)) => {
                    info!("  {=str}: exited with status {=i32}", d.name.as_str(), code)
                }
                Some(Ending::Terminated(why)) => {
                    info!("  {=str}: terminated ({=str})", d.name.as_str(), why.name())
                }
                None => info!("  {=str}: still running", d.name.as_str()),
            }
        }
        for (id, d) in domains.iter() {
            let (Some(a), Some(c)) = (cpu.accounts(id.index()), cpu.contract(id.index())) else {
                continue;
            };
            info!(
                "  {=str}: cpu {=u64} us guaranteed + {=u64} us extra, {=u64} periods of {=u64} us, {=u64} deadlines missed, {=u64} periods ended late (contract: slice {=u64} us, extra {=bool})",
                d.name.as_str(),
                a.guaranteed / 1000,
                a.extra / 1000,
                a.periods,
                c.period / 1000,
                a.deadlines_missed,
                a.late_ends,
                c.slice / 1000,
                c.extra
            );
        }
        for d in domains.records().filter(|d| d.faults > 0) {
            info!(
                "  {=str}: {=u64} page faults delivered to its stretch drivers",
                d.name.as_str(),
                d.faults
            );
        }
        let free = P::with_frames(|fa| fa.free_count());
        info!(
            "frames: {=u64} free after all domains ended, {=u64} before they started",
            free, self.free_before
        );
        info!(
            "kernel heap: {=usize} bytes in use at the end, {=usize} once the domains were made",
            P::heap_used(),
            self.boot_heap
        );
    }
}

/// Reports fault `fault` of domain `id` at `pc`: what it was, and where its address lies
/// (whose stretch and with what rights, a stack's guard page, outside the user half).
pub(crate) fn report_fault<P: Platform>(
    domains: &Domains<P>,
    stretches: &Stretches<P::Arena>,
    id: DomainId,
    fault: UserFault,
    pc: usize,
) {
    let name = domains[id].name.as_str();
    let cause = fault.name();
    let addr = match fault {
        UserFault::IllegalInstruction { bits: Some(bits) } => {
            error!(
                "domain {=str}: {=str} (instruction bits {=u64:#x}), pc={=u64:#x}",
                name, cause, bits, pc as u64
            );
            return;
        }
        f => match f.addr() {
            Some(addr) => addr,
            None => {
                error!("domain {=str}: {=str}, pc={=u64:#x}", name, cause, pc as u64);
                return;
            }
        },
    };
    error!(
        "domain {=str}: {=str} at address {=u64:#x}, pc={=u64:#x}",
        name, cause, addr as u64, pc as u64
    );
    let guarded = stretches
        .containing(addr.saturating_add(PAGE_SIZE))
        .filter(|s| s.kind == Kind::Stack && addr < s.base && stretches.containing(addr).is_none());
    match (stretches.containing(addr), guarded) {
        (Some(s), _) => error!(
            "domain {=str}: the address is in {=str} stretch {=u64:#x}..{=u64:#x} of domain {=str}, where it holds rights {=u8:#x}",
            name,
            s.kind.name(),
            s.base as u64,
            s.end() as u64,
            domains[s.owner].name.as_str(),
            s.rights_of(id).0
        ),
        (None, Some(s)) => error!(
            "domain {=str}: the address is in the guard page below the stack {=u64:#x}..{=u64:#x} of domain {=str}",
            name,
            s.base as u64,
            s.end() as u64,
            domains[s.owner].name.as_str()
        ),
        (None, None) if !(abi::USER_BASE..abi::USER_END).contains(&addr) => {
            error!("domain {=str}: the address is outside the user half", name)
        }
        (None, None) => error!("domain {=str}: no stretch contains the address", name),
    }
}
