//! Which page the compressed cache expels when its pool is full: the compressed-cache lab's
//! file (`docs/labs/ccache.md`).
//!
//! The compressed cache ([`super::CompressedCache`]) keeps evicted pages compressed in a pool
//! of bounded size. When a page does not fit, the cache expels entries to the layer below (the
//! disk, through the basic cache) until it does; a flush expels them all. [`choose_victim`]
//! decides which entry goes, from the entries of the pool, oldest first.
//!
//! What an expelled entry costs depends on whether it is *dirty*: a dirty page's contents are
//! in the pool only, so expelling it costs a disk write (and a decompression); a clean page is
//! held by the backing store too, so the layer below drops it at no cost. A zero page is kept
//! as a mark, of size 0: expelling it makes no room.

// ANCHOR: candidate
/// An entry of the pool as the expel policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The page it holds.
    pub page: usize,
    /// Whether the backing store may not hold the page's contents (expelling it writes it).
    pub dirty: bool,
    /// The pool bytes it takes: whole sub-pages of compressed bytes, a page for a raw entry,
    /// 0 for a zero mark.
    pub size: usize,
}
// ANCHOR_END: candidate

/// The page to expel from `oldest_first`, the pool's entries from the oldest put to the
/// newest, or `None` if none may go. With `for_space` (the pool is full and a page must fit),
/// only an entry that frees pool bytes may go; without (a flush), any entry.
pub fn choose_victim(
    oldest_first: impl Iterator<Item = Candidate>,
    for_space: bool,
) -> Option<usize> {
    // LAB(ccache) BEGIN
    // Clean first: the oldest clean entry costs no disk write; else the oldest entry.
    let mut oldest = None;
    for entry in oldest_first {
        if for_space && entry.size == 0 {
            continue;
        }
        if !entry.dirty {
            return Some(entry.page);
        }
        oldest.get_or_insert(entry.page);
    }
    oldest
    // LAB(ccache) HANDOUT
    // let _ = (oldest_first, for_space);
    // todo!("lab ccache: choose the entry to expel; see docs/labs/ccache.md")
    // LAB(ccache) END
}
