//! The graded tests of the course lab `syscall` (`labs/syscall/lab.toml`,
//! `docs/labs/syscall.md`): `domain_info(buf, len)` on the mock machine. Each says what it
//! expected and what the call did, in the terms of the chapter.

use abi::{Call, DomainInfo, PAGE_SIZE, Rights, SysError};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::{D0, D1, RW, W, call, managed, space, world};
use crate::Platform;
use crate::contract::AddressSpaceOps as _;
use crate::mock::Mock;

const SIZE: usize = DomainInfo::SIZE;

/// A byte the tests fill buffers with, to see what the call wrote.
const FILL: u8 = 0xa5;

/// `domain_info(buf, len)` by domain D0 (its protection domain current, as on the machine);
/// a panic (a kernel panic on the machine) fails the test saying so.
fn domain_info(w: &mut W, buf: usize, len: usize) -> Result<usize, SysError> {
    space(w, D0).activate();
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        call(w, D0, Call::DomainInfo, &[buf, len])
    }));
    match run {
        Ok(r) => r,
        Err(e) => {
            let why = e
                .downcast_ref::<&str>()
                .map(|s| String::from(*s))
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            panic!(
                "domain_info({buf:#x}, {len}) panicked (\"{why}\"): on the machine that is a \
                 kernel panic. A bad argument must get an error code, never a panic"
            )
        }
    }
}

/// A nailed stretch of `pages` pages of D0 with `rights`, filled with [`FILL`] where it is
/// writable.
fn stretch(w: &mut W, pages: usize, rights: Rights) -> usize {
    let base = call(w, D0, Call::StretchCreate, &[pages * PAGE_SIZE, rights.0 as usize]).unwrap();
    space(w, D0).activate();
    if rights.contains(Rights::WRITE) {
        Mock::copy_to_user(&vec![FILL; pages * PAGE_SIZE], base).unwrap();
    }
    base
}

/// `len` bytes of D0's memory at `at`.
fn read(w: &W, at: usize, len: usize) -> Vec<u8> {
    space(w, D0).activate();
    let mut b = vec![0; len];
    Mock::copy_from_user(&mut b, at).expect("the test's own buffer is readable");
    b
}

/// Fails unless `bytes` are all `want` (the call wrote nothing there).
fn untouched(bytes: &[u8], want: u8, what: &str) {
    if let Some(i) = bytes.iter().position(|b| *b != want) {
        panic!(
            "{what}: a refused call (or the bytes past the record) must be left as they were, but \
             byte {i} is {:#04x}, not {want:#04x}: check every argument before copying anything",
            bytes[i]
        );
    }
}

#[test]
fn a_good_call_copies_the_record() {
    let mut w = world(&[(64, 8), (64, 0)]);
    w.domains[D0].name = "gold".into();
    w.domains[D0].faults = 3;
    let buf = stretch(&mut w, 1, RW);
    let got = domain_info(&mut w, buf, SIZE);
    assert_eq!(
        got,
        Ok(SIZE),
        "domain_info(buf, {SIZE}) into a writable buffer must return the record's size"
    );
    let bytes: [u8; SIZE] = read(&w, buf, SIZE).try_into().unwrap();
    let record = DomainInfo::from_bytes(&bytes);
    let want = DomainInfo::new(0, "gold", 64, 8, w.domains.charged(D0), 3);
    assert_eq!(
        record, want,
        "the bytes at buf must be the caller's own record (DomainInfo::to_bytes): its id, name, \
         guaranteed and optimistic frames, the frames charged to it and its faults"
    );
    // Another domain's call gets its own record.
    w.domains[D1].name = "silver".into();
    let other = call(&mut w, D1, Call::StretchCreate, &[PAGE_SIZE, RW.0 as usize]).unwrap();
    space(&w, D1).activate();
    assert_eq!(call(&mut w, D1, Call::DomainInfo, &[other, SIZE]), Ok(SIZE));
    let mut b = [0u8; SIZE];
    Mock::copy_from_user(&mut b, other).unwrap();
    let theirs = DomainInfo::from_bytes(&b);
    assert_eq!(
        (theirs.id, theirs.name(), theirs.guaranteed_frames),
        (1, "silver", 64),
        "domain 1's call must copy domain 1's record, not another's"
    );
}

#[test]
fn a_longer_buffer_gets_the_record_and_no_more() {
    let mut w = world(&[(64, 0)]);
    let buf = stretch(&mut w, 1, RW);
    let got = domain_info(&mut w, buf, SIZE + 100);
    assert_eq!(got, Ok(SIZE), "a buffer longer than the record gets the record: {SIZE} bytes");
    let after = read(&w, buf + SIZE, 100);
    untouched(&after, FILL, "the 100 bytes after the record");
    assert_eq!(read(&w, buf, 4), [0, 0, 0, 0], "the record's first field is the caller's id, 0");
}

#[test]
fn a_short_buffer_is_an_invalid_argument_and_untouched() {
    let mut w = world(&[(64, 0)]);
    let buf = stretch(&mut w, 1, RW);
    for len in [0, 1, SIZE - 1] {
        let got = domain_info(&mut w, buf, len);
        assert_eq!(
            got,
            Err(SysError::InvalidArgument),
            "a buffer of {len} bytes cannot hold the {SIZE}-byte record: InvalidArgument"
        );
        untouched(&read(&w, buf, SIZE), FILL, &format!("a {len}-byte buffer"));
    }
}

#[test]
fn a_buffer_outside_the_callers_memory_is_a_bad_address() {
    let mut w = world(&[(64, 0), (64, 0)]);
    // Another domain's stretch, which D0 holds no rights on.
    let theirs = call(&mut w, D1, Call::StretchCreate, &[PAGE_SIZE, RW.0 as usize]).unwrap();
    let cases = [
        (0, "a null pointer"),
        (0x10, "an address below the user half"),
        (0xffff_ffc0_8020_0000, "a kernel address"),
        (abi::USER_END - 8, "an address at the end of the user half"),
        (theirs, "another domain's stretch"),
        (theirs + 16 * PAGE_SIZE, "an address no stretch holds"),
    ];
    for (buf, what) in cases {
        let got = domain_info(&mut w, buf, SIZE);
        assert_eq!(
            got,
            Err(SysError::BadAddress),
            "domain_info({buf:#x}, {SIZE}), {what}: want BadAddress"
        );
    }
}

#[test]
fn a_read_only_buffer_is_a_bad_address_and_not_written() {
    let mut w = world(&[(64, 0)]);
    let ro = stretch(&mut w, 1, Rights::READ);
    let got = domain_info(&mut w, ro, SIZE);
    assert_eq!(
        got,
        Err(SysError::BadAddress),
        "the caller may read this buffer but not write it (a stretch with read rights only): \
         BadAddress"
    );
    untouched(&read(&w, ro, SIZE), 0, "a read-only buffer");
}

#[test]
fn a_buffer_that_runs_off_its_stretch_or_wraps_writes_nothing() {
    let mut w = world(&[(64, 0)]);
    let buf = stretch(&mut w, 1, RW);
    // The record's first 8 bytes would land in the stretch, the rest beyond it.
    let edge = buf + PAGE_SIZE - 8;
    let got = domain_info(&mut w, edge, SIZE);
    assert_eq!(
        got,
        Err(SysError::BadAddress),
        "a buffer whose last {} bytes are past the end of its stretch: BadAddress",
        SIZE - 8
    );
    untouched(&read(&w, edge, 8), FILL, "the 8 bytes at the end of the stretch");
    for buf in [usize::MAX - 8, usize::MAX - SIZE + 1] {
        let got = domain_info(&mut w, buf, SIZE);
        assert_eq!(
            got,
            Err(SysError::BadAddress),
            "domain_info({buf:#x}, {SIZE}): the range wraps around the address space: BadAddress"
        );
    }
}

#[test]
fn an_unmapped_page_of_a_managed_stretch_is_a_bad_address() {
    let mut w = world(&[(64, 0)]);
    let (base, frames) = managed(&mut w, D0, 2);
    // The first page mapped writable, the second not: the kernel must not fault on the
    // caller's behalf (its own stretch driver maps its pages).
    assert_eq!(call(&mut w, D0, Call::Map, &[base, frames[0], RW.0 as usize]), Ok(0));
    space(&w, D0).activate();
    Mock::copy_to_user(&[FILL; PAGE_SIZE], base).unwrap();
    let straddle = base + PAGE_SIZE - 8;
    let got = domain_info(&mut w, straddle, SIZE);
    assert_eq!(
        got,
        Err(SysError::BadAddress),
        "a buffer running from a mapped page onto a page of a managed stretch that is not \
         mapped: BadAddress, before anything is written"
    );
    untouched(&read(&w, straddle, 8), FILL, "the 8 bytes on the mapped page");
    // Mapped read-only, the page may not be written either.
    assert_eq!(call(&mut w, D0, Call::Protect, &[base, Rights::READ.0 as usize]), Ok(0));
    let got = domain_info(&mut w, base, SIZE);
    assert_eq!(
        got,
        Err(SysError::BadAddress),
        "a page of a managed stretch mapped read-only: BadAddress"
    );
    untouched(&read(&w, base, SIZE), FILL, "a managed page mapped read-only");
}
