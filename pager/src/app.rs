//! The application's side of its pager: [`AppHandler`] hears of changes to the domain's
//! guarantees and may answer by resizing its cache, and hears of pages the disk lost;
//! [`NoAppHandler`] ignores both.

/// A change to the guarantees the pager works under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuaranteeChange {
    /// Frames were revoked and released.
    FramesRevoked {
        /// Frames released by this revocation.
        released: usize,
        /// Frames the pager holds now.
        frames_now: usize,
    },
}

/// The application's handler of guarantee changes (Heracles's AppHandler).
pub trait AppHandler {
    /// The pager's guarantees changed. Returning `Some(bytes)` resizes the cache to `bytes`
    /// (the application can also resize it at any time through the pager).
    fn guarantees_changed(&mut self, change: GuaranteeChange) -> Option<usize> {
        let _ = change;
        None
    }

    /// `page` (its number within the stretch) is lost: the disk kept failing the read of its
    /// only copy. The pager goes on as if it had never been written: the access that found
    /// the loss, and every later one, reads zeros until the page is written again. Called
    /// before the faulting access completes.
    fn page_lost(&mut self, page: usize) {
        let _ = page;
    }
}

/// An application that does not care: keeps its cache as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoAppHandler;

impl AppHandler for NoAppHandler {}
