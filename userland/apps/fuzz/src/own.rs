//! What belongs to the fuzzer: its image slot, a few of its own addresses, its IO channel, the
//! stretches it created (with the rights it holds on each), and the managed stretches and loose
//! frames it holds. [`Own::harmless`] is the rule every fuzzed call must pass before
//! `raw_calls` makes it.

use abi::{Call, IMAGE_BASE, IMAGE_SLOT, Rights, STRETCH_BASE, USER_END};

use crate::held::Memory;

/// At most this many stretches of its own exist at once.
pub const MAX_CREATED: usize = 256;

/// A stretch the fuzzer created and has not destroyed.
#[derive(Clone, Copy)]
pub struct Created {
    /// Its base address.
    pub base: usize,
    /// Its size in pages.
    pub pages: usize,
    /// The rights the fuzzer's own domain holds on it now.
    pub rights: u8,
    /// The word the fuzzer wrote at the start of its first and last page (0: none).
    pub marker: u64,
}

/// The fuzzer's own memory.
pub struct Own {
    /// Its domain id.
    pub id: usize,
    /// Its image slot's base address.
    pub slot: usize,
    /// Addresses inside its image and stack (code, read-only data, data, stack, arguments).
    pub addrs: [usize; 5],
    /// Its control block's address.
    pub dcb: usize,
    /// The base of the IO channel it sends on, if the manifest gave it one. It holds no
    /// reference into that memory, which is why the fuzzer may pass it to `stretch_destroy`.
    pub channel: Option<usize>,
    /// How many domains the manifest has (`--domains`, default 4): domain ids are drawn
    /// below this plus two.
    pub domains: usize,
    /// The managed stretches and loose frames it holds.
    pub mem: Memory,
    created: [Created; MAX_CREATED],
    len: usize,
}

impl Own {
    /// The fuzzer of domain `id`.
    pub fn new(id: usize, addrs: [usize; 5], dcb: usize, channel: Option<usize>) -> Own {
        let empty = Created { base: 0, pages: 0, rights: 0, marker: 0 };
        Own {
            id,
            slot: IMAGE_BASE + id * IMAGE_SLOT,
            addrs,
            dcb,
            channel,
            domains: 4,
            mem: Memory::new(),
            created: [empty; MAX_CREATED],
            len: 0,
        }
    }

    /// Might `addr` be memory the fuzzer can access (its image slot, or the range where the
    /// kernel puts stacks, control blocks, channels and run-time stretches)? Conservative:
    /// other domains' stacks are in that range too.
    pub fn may_be_own(&self, addr: usize) -> bool {
        (self.slot..self.slot + IMAGE_SLOT).contains(&addr)
            || (STRETCH_BASE..USER_END).contains(&addr)
    }

    /// Could `target` name the fuzzer's own domain, were the kernel to truncate it to 32 bits?
    pub fn may_be_me(&self, target: usize) -> bool {
        target & 0xffff_ffff == self.id
    }

    /// The stretches it created, oldest first.
    pub fn created(&self) -> &[Created] {
        &self.created[..self.len]
    }

    /// The created stretch at `base`.
    pub fn find(&self, base: usize) -> Option<&Created> {
        self.created().iter().find(|c| c.base == base)
    }

    /// The created stretch at `base`, to update.
    pub fn find_mut(&mut self, base: usize) -> Option<&mut Created> {
        self.created[..self.len].iter_mut().find(|c| c.base == base)
    }

    /// Is there room to record another stretch?
    pub fn full(&self) -> bool {
        self.len == MAX_CREATED
    }

    /// Records a new stretch; false if the table is full.
    pub fn record(&mut self, c: Created) -> bool {
        if self.full() {
            return false;
        }
        self.created[self.len] = c;
        self.len += 1;
        true
    }

    /// Forgets the stretch at `base` (after it was destroyed).
    pub fn forget(&mut self, base: usize) {
        if let Some(i) = self.created().iter().position(|c| c.base == base) {
            self.created.copy_within(i + 1..self.len, i);
            self.len -= 1;
        }
    }

    /// Can call `n` with `args` not take away the fuzzer's access to memory its Rust code uses
    /// (image, stack, control block), nor move its control flow, *even if the kernel wrongly
    /// carried it out instead of refusing it*? The fuzzer only makes calls that pass.
    ///
    /// - `exit` and `block` never pass (the fuzzer ends with `tessera::exit`).
    /// - `stretch_destroy`: a stretch it created (nothing references them), a managed stretch it
    ///   holds (it references none of their pages), its channel, or an address outside its own
    ///   memory.
    /// - `stretch_rights` for itself on its own memory: only rights with all four bits, which
    ///   can only add access; on stretches it created anything goes.
    /// - `activation_set`: entry 0 (no handler) or an entry outside its own memory, so no
    ///   handler could ever run its code with a fuzzed stack.
    /// - `resume`: only a context outside its own memory, so none of its bytes is ever loaded.
    /// - the self-paging calls always pass: `map`, `unmap` and `protect` act only on managed
    ///   stretches (the fuzzer's own memory is nailed), and `frame_free` only on loose frames,
    ///   which hold none of the memory its code uses (see `paging`).
    /// - the loan calls always pass: the fuzzer has no channel to a driver domain, so
    ///   `frame_lend` lends nothing, `loan_address` answers only a driver, and `frame_return`
    ///   ends only loans that were made.
    /// - `page_state` writes its states only to the buffer `held::STATES` (the count within
    ///   it), an unmapped page of a managed stretch it holds, or memory outside its own.
    /// - `domain_info` writes its record only to memory outside its own.
    /// - unknown numbers: no argument points into its own memory, in case the kernel decoded
    ///   the number as some call after all.
    pub fn harmless(&self, n: usize, a: [usize; 6]) -> bool {
        let Some(call) = Call::from_number(n) else {
            return a.iter().all(|&x| !self.may_be_own(x));
        };
        match call {
            Call::Exit | Call::Block => false,
            Call::ConsoleWrite
            | Call::Yield
            | Call::Time
            | Call::Null
            | Call::EventSend
            | Call::StretchCreate
            | Call::TimerAlloc
            | Call::TimerSet
            | Call::StretchCreateManaged
            | Call::FrameAlloc
            | Call::FrameFree
            | Call::Map
            | Call::Unmap
            | Call::Protect
            | Call::Remap
            | Call::MapBatch
            | Call::DmaAlloc
            | Call::DmaAddress
            | Call::IrqAck
            | Call::LoanAddress
            | Call::FrameReturn
            | Call::FrameLend => true,
            Call::StretchDestroy => {
                self.find(a[0]).is_some()
                    || self.mem.is_managed(a[0])
                    || Some(a[0]) == self.channel
                    || !self.may_be_own(a[0])
            }
            Call::StretchRights => {
                !self.may_be_me(a[1])
                    || self.find(a[0]).is_some()
                    || !self.may_be_own(a[0])
                    || a[2] & Rights::ALL_BITS as usize == Rights::ALL_BITS as usize
            }
            Call::PageState => {
                crate::held::in_states(a[2], a[1])
                    || self.mem.unmapped_managed(a[2])
                    || !self.may_be_own(a[2])
            }
            Call::ActivationSet => a[0] == 0 || !self.may_be_own(a[0]),
            Call::DomainInfo => !self.may_be_own(a[0]),
            Call::Resume => !self.may_be_own(a[0]) && !self.may_be_own(a[0].wrapping_add(263)),
        }
    }
}
