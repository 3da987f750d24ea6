//! A batch of page-table changes, the bookkeeping shared by the architectures' address spaces:
//! within a batch ([`AddressSpaceOps::begin_batch`] to [`AddressSpaceOps::end_batch`]) each
//! change's TLB flush is held back in the kernel-wide [`DEFERRED`], and the batch's end hands
//! what was held back to the architecture, which flushes it its own way (RISC-V `sfence.vma`
//! by page or ASID; x86_64 `invlpg` or a CR3 write).
//!
//! [`AddressSpaceOps::begin_batch`]: super::AddressSpaceOps::begin_batch
//! [`AddressSpaceOps::end_batch`]: super::AddressSpaceOps::end_batch

use core::cell::Cell;

use super::contract::{DEFERRED, DeferredFlush};

/// An address space's part in a batch: whether one is under way. The space stays small and its
/// common paths read one word.
pub struct FlushBatch(Cell<bool>);

impl FlushBatch {
    /// No batch under way.
    pub const fn new() -> Self {
        FlushBatch(Cell::new(false))
    }

    /// Begins a batch, or goes on with the one already begun.
    #[inline]
    pub fn begin(&self) {
        if !self.0.replace(true) {
            *DEFERRED.lock() = DeferredFlush::new();
        }
    }

    /// Ends the batch: what it held back, to flush now; `None` if none was under way.
    #[inline]
    pub fn end(&self) -> Option<DeferredFlush> {
        self.0.replace(false).then(|| *DEFERRED.lock())
    }

    /// Within a batch, holds back the flush of a change at the page `va` (with `tables`, of
    /// non-leaf entries) and returns `true`; outside one, `false`: the caller flushes now.
    #[inline]
    pub fn defer(&self, va: usize, tables: bool) -> bool {
        if self.0.get() {
            DEFERRED.lock().note(va, tables);
            return true;
        }
        false
    }
}
