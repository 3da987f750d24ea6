//! `lendcheck`: frame loans (`frame_lend`, `loan_address`, `frame_return`) checked from both
//! ends, by a client and a driver domain joined by the channels `ln-req` and `ln-resp`.
//!
//! Usage: `lendcheck client --stranger ID`, `lendcheck driver`, `lendcheck stranger`.
//!
//! - The client binds a demand-zero stretch driver to two pages and fills both. It may not lend
//!   what it does not own (a nailed page: `NotManaged`; an address outside its stretches:
//!   `BadAddress`; a page not mapped: `NotMapped`) nor to a driver domain it has no channel to
//!   (the `stranger`, domain `ID`: `PermissionDenied` at each of its endpoints). It lends page
//!   0 for the device to write and writes it: the write faults and waits until the driver
//!   returns the loan (the driver holds it 50 ms); it prints how long and that its data is
//!   intact. It lends page 1 for the device to read: it can still read it; the driver dies
//!   holding the loan, and the page is back, writable, its data intact.
//! - The driver checks what it is given against the loan (another lender's, longer than a
//!   page), returns the first loan and is refused when it uses it again (`NotFound`), and
//!   faults on purpose holding the second.
//!
//! Every line starts `lendcheck:`; the client exits 0 if every check held.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use core::ops::Range;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use abi::loan_access;
use stretch_driver::driver_core::fault_error;
use stretch_driver::{
    DriverCore, DriverError, Fault, FaultError, MemoryKernel, StretchDriver, StretchInfo,
};
use tessera::channel::{open_receiver, open_sender};
use tessera::{Env, PAGE_SIZE, Rights, SysError, paging, println, syscall, thread};

tessera::main!(main);

/// How long the driver holds the first loan.
const HOLD_NS: u64 = 50_000_000;

/// The client's page lent for the device to write (0: none).
static LENT_PAGE: AtomicUsize = AtomicUsize::new(0);
/// Faults the client took on it.
static LENT_FAULTS: AtomicU64 = AtomicU64::new(0);

/// Demand-zero on guaranteed frames; a fault on the page lent waits until it is mapped again.
struct Driver {
    core: DriverCore,
}

/// Whether page `va` is mapped now.
fn mapped(va: usize) -> bool {
    let mut state = [0u8];
    syscall::page_state(va, &mut state, 0).is_ok() && state[0] & abi::page_state::MAPPED != 0
}

impl StretchDriver for Driver {
    fn bind(&mut self, _k: &mut dyn MemoryKernel, s: StretchInfo) -> Result<(), DriverError> {
        self.core.bind(s)
    }

    fn fault(&mut self, k: &mut dyn MemoryKernel, fault: Fault) -> Result<(), FaultError> {
        let Some((s, index)) = self.core.begin_fault(&fault)? else {
            // Mapped in the driver's record, not in the page table: the page is lent. The
            // access waits until the loan comes back (at most a second).
            if fault.page() == LENT_PAGE.load(Ordering::Relaxed) {
                LENT_FAULTS.fetch_add(1, Ordering::Relaxed);
                let until = tessera::time_ns() + 1_000_000_000;
                while !mapped(fault.page()) && tessera::time_ns() < until {
                    thread::sleep(1_000_000);
                }
            }
            return Ok(());
        };
        self.core.map_new(k, index, s.page_rights()).map(|_| ()).map_err(fault_error)
    }

    fn lock(&mut self, _k: &mut dyn MemoryKernel, _r: Range<usize>) -> Result<(), DriverError> {
        Err(DriverError::OutOfMemory)
    }

    fn core(&self) -> &DriverCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DriverCore {
        &mut self.core
    }
}

/// What the client asks of the driver, with a loan.
const HOLD_AND_RETURN: u64 = 1;
const TAKE_AND_DIE: u64 = 2;

fn main(env: Env) -> i32 {
    let mut args = env.args;
    let role = args.next();
    let mut stranger = None;
    while let Some(a) = args.next() {
        if a == "--stranger" {
            stranger = args.next().and_then(|v| v.parse::<usize>().ok());
        }
    }
    match (role, stranger) {
        (Some("client"), Some(id)) => client(id),
        (Some("driver"), _) => driver(),
        (Some("stranger"), _) => {
            println!("lendcheck: stranger id={}", tessera::dcb().domain_id);
            thread::sleep(300_000_000);
            0
        }
        _ => {
            println!("lendcheck: usage: lendcheck client --stranger ID | driver | stranger");
            2
        }
    }
}

/// The name of a call's outcome.
fn outcome<T>(r: Result<T, SysError>) -> &'static str {
    match r {
        Ok(_) => "Ok",
        Err(e) => e.name(),
    }
}

/// Fills page `va` with bytes from `seed`.
fn fill(va: usize, seed: u8) {
    for i in 0..PAGE_SIZE {
        // SAFETY: a page of the stretch the client bound, read-write for it; the write faults
        // to its driver, which maps it.
        unsafe { ((va + i) as *mut u8).write_volatile(seed.wrapping_add(i as u8)) };
    }
}

/// Whether page `va` holds what [`fill`] wrote with `seed`.
fn intact(va: usize, seed: u8) -> bool {
    // SAFETY: as for `fill`; reads only.
    (0..PAGE_SIZE)
        .all(|i| unsafe { ((va + i) as *const u8).read_volatile() } == seed.wrapping_add(i as u8))
}

fn client(stranger: usize) -> i32 {
    let (Some(mut tx), Some(mut rx)) = (open_sender("ln-req"), open_receiver("ln-resp")) else {
        println!("lendcheck: no channels ln-req and ln-resp");
        return 1;
    };
    let (drv, ep) = tx.peer();
    let driver = Box::leak(Box::new(Driver { core: DriverCore::new() }));
    let info = match paging::bind(driver, 2 * PAGE_SIZE, Rights::READ.union(Rights::WRITE)) {
        Ok(info) => info,
        Err(e) => {
            println!("lendcheck: bind failed: {e}");
            return 1;
        }
    };
    let (p0, p1) = (info.page_addr(0), info.page_addr(1));
    let mut ok = true;
    // Not mapped yet, then what the client does not own, then whom it has no channel to.
    ok &= check("lend an unmapped page", outcome(syscall::frame_lend(p0, drv, ep, 0)), "NotMapped");
    fill(p0, 1);
    fill(p1, 2);
    let nailed = syscall::stretch_create(PAGE_SIZE, Rights::READ.union(Rights::WRITE));
    let nailed = nailed.unwrap_or(0);
    ok &=
        check("lend a nailed page", outcome(syscall::frame_lend(nailed, drv, ep, 0)), "NotManaged");
    let elsewhere = abi::USER_END - 16 * PAGE_SIZE;
    ok &= check(
        "lend another's page",
        outcome(syscall::frame_lend(elsewhere, drv, ep, 0)),
        "BadAddress",
    );
    let refused = (0..4).all(|e| {
        let r = syscall::frame_lend(p0, stranger, e, loan_access::DEVICE_READS);
        matches!(r, Err(SysError::PermissionDenied | SysError::InvalidArgument))
    });
    let r = syscall::frame_lend(p0, stranger, 0, loan_access::DEVICE_READS);
    ok &= check("lend to a driver with no channel", outcome(r), "PermissionDenied");
    ok &= refused;
    ok &= check(
        "lend with a bad access",
        outcome(syscall::frame_lend(p0, drv, ep, 9)),
        "InvalidArgument",
    );
    // Lent for the device to write: out of the client's view; a write waits for the return.
    let Ok(loan) = syscall::frame_lend(p0, drv, ep, loan_access::DEVICE_WRITES) else {
        println!("lendcheck: the loan was refused");
        return 1;
    };
    LENT_PAGE.store(p0, Ordering::Relaxed);
    println!("lendcheck: lent page 0 for the device to write: mapped={}", u8::from(mapped(p0)));
    ok &= !mapped(p0);
    let again = syscall::frame_lend(p0, drv, ep, loan_access::DEVICE_READS);
    ok &= check("lend it again", outcome(again), "InUse");
    ok &= check("unmap it", outcome(syscall::unmap(p0)), "InUse");
    let start = tessera::time_ns();
    if send(&mut tx, HOLD_AND_RETURN, loan).is_err() {
        return 1;
    }
    // SAFETY: page 0 of the stretch bound above; the write faults while the page is lent, and
    // its driver waits for the loan to come back.
    unsafe { (p0 as *mut u8).write_volatile(1) };
    let waited = tessera::time_ns() - start;
    let returned = recv(&mut rx);
    println!(
        "lendcheck: write to the lent page waited {waited} ns (faults on it={}), driver says {returned:?}, page intact={}",
        LENT_FAULTS.load(Ordering::Relaxed),
        intact(p0, 1)
    );
    ok &= LENT_FAULTS.load(Ordering::Relaxed) >= 1 && intact(p0, 1) && returned == Some(0);
    LENT_PAGE.store(0, Ordering::Relaxed);
    // Lent for the device to read: the client still reads it; the driver dies holding it.
    let Ok(loan) = syscall::frame_lend(p1, drv, ep, loan_access::DEVICE_READS) else {
        println!("lendcheck: the second loan was refused");
        return 1;
    };
    let readable = intact(p1, 2);
    let faults = info_faults(info.base);
    if send(&mut tx, TAKE_AND_DIE, loan).is_err() {
        return 1;
    }
    let gone = recv(&mut rx).is_none();
    fill(p1, 3);
    let refaults = info_faults(info.base) - faults;
    println!(
        "lendcheck: lent page 1 for the device to read: readable={readable}; the driver died holding it: gone={gone} mapped={} written_without_fault={} (faults {refaults})",
        u8::from(mapped(p1)),
        refaults == 0 && intact(p1, 3)
    );
    ok &= readable && gone && mapped(p1) && refaults == 0 && intact(p1, 3);
    ok &= check("return a loan the driver ended", outcome(syscall::frame_return(loan)), "NotFound");
    println!("lendcheck: client done ok={ok}");
    if ok { 0 } else { 1 }
}

/// Prints what a call returned; whether it is what was wanted.
fn check(what: &str, got: &str, want: &str) -> bool {
    println!("lendcheck: {what}: {got}");
    got == want
}

/// Faults the client's stretch driver took.
fn info_faults(base: usize) -> u64 {
    paging::with_driver(base, |d: &mut Driver, _| d.core.stats.faults).unwrap_or(0)
}

fn send(tx: &mut tessera::channel::Sender, op: u64, loan: u64) -> Result<(), ()> {
    let mut msg = [0u8; 16];
    msg[..8].copy_from_slice(&op.to_le_bytes());
    msg[8..].copy_from_slice(&loan.to_le_bytes());
    tx.send(&msg).map_err(|e| println!("lendcheck: send failed: {e:?}"))
}

/// The next word from the channel (`None`: closed).
fn recv(rx: &mut tessera::channel::Receiver) -> Option<u64> {
    let mut buf = [0u8; 16];
    let n = rx.recv(&mut buf).ok()?;
    (n >= 8).then(|| u64::from_le_bytes(buf[..8].try_into().unwrap_or_default()))
}

fn driver() -> i32 {
    let (Some(mut rx), Some(mut tx)) = (open_receiver("ln-req"), open_sender("ln-resp")) else {
        println!("lendcheck: no channels ln-req and ln-resp");
        return 1;
    };
    let lender = rx.peer_domain();
    let mut buf = [0u8; 16];
    while let Ok(n) = rx.recv(&mut buf) {
        if n != 16 {
            return 1;
        }
        let op = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
        let loan = u64::from_le_bytes(buf[8..].try_into().unwrap_or_default());
        let wrong = outcome(syscall::loan_address(loan, lender + 1, PAGE_SIZE));
        let long = outcome(syscall::loan_address(loan, lender, PAGE_SIZE + 1));
        let pa = syscall::loan_address(loan, lender, PAGE_SIZE);
        println!(
            "lendcheck: driver: loan from domain {}: another lender {wrong}, longer than a page {long}, address {}",
            abi::loan_lender(loan),
            if pa.is_ok_and(|pa| pa != 0 && pa % PAGE_SIZE as u64 == 0) {
                "page-aligned"
            } else {
                "refused"
            }
        );
        if op == TAKE_AND_DIE {
            println!("lendcheck: driver: dying holding the loan");
            tessera::fault::now();
        }
        thread::sleep(HOLD_NS);
        let returned = outcome(syscall::frame_return(loan));
        let used = outcome(syscall::loan_address(loan, lender, PAGE_SIZE));
        let again = outcome(syscall::frame_return(loan));
        println!(
            "lendcheck: driver: returned {returned}; the returned loan: loan_address {used}, frame_return {again}"
        );
        let status = u64::from(returned != "Ok" || used != "NotFound" || again != "NotFound");
        if tx.send(&status.to_le_bytes()).is_err() {
            return 1;
        }
    }
    0
}
