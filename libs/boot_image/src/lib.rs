//! Tessera's boot image: the compiled manifest and one relocated image per domain, packed by
//! xtask into a single blob that QEMU hands to the kernel with `-initrd`.
//!
//! Layout (all integers little-endian):
//!
//! | offset | size | field                                                         |
//! |-------:|-----:|---------------------------------------------------------------|
//! | 0      | 4    | magic `b"TSBI"`                                               |
//! | 4      | 2    | format version ([`VERSION`])                                  |
//! | 6      | 2    | reserved, must be 0                                           |
//! | 8      | 4    | directory length `D` in bytes                                 |
//! | 12     | 8    | total length of the image, header included                    |
//! | 20     | 4    | CRC-32 (IEEE, as zlib) of every byte after the header         |
//! | 24     | `D`  | the directory, postcard-encoded                               |
//! | 24+`D` | rest | the data area: raw segment bytes                              |
//!
//! The directory holds the manifest bytes (opaque here; the `manifest` crate owns their format)
//! and one [`ImageEntry`] per domain instance, each with its entry point and its
//! [`SegmentEntry`]s. A segment's `file_offset` is relative to the start of the data area; its
//! `file_size` bytes are copied to `vaddr` and the rest of `mem_size` (`.bss`, page padding) is
//! zero-filled.
//!
//! Invariants [`BootImage::parse`] establishes (nothing is trusted): the magic, version and
//! reserved field; the total length equals the blob's length; the CRC; the directory decodes
//! exactly, with no bytes left over; and for every image: a non-empty, unique domain name, at
//! least one segment, segments sorted by address and non-overlapping, each with a page-aligned
//! `vaddr`, a non-zero page-multiple `mem_size`, `file_size <= mem_size`, a file range inside
//! the data area, rights that are a non-empty subset of read, write and execute without both
//! write and execute, no arithmetic overflow anywhere, and an entry point inside an executable
//! segment. Different images' address ranges (first segment start to last segment end) do not
//! overlap: it is one address space.
//!
//! Not implemented yet: compression, signatures, images for more than one architecture, and
//! page-aligned segment data in the blob (the kernel copies segment bytes into frames).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::{Deserialize, Serialize};

/// The first four bytes of every boot image.
pub const MAGIC: [u8; 4] = *b"TSBI";
/// The format version this crate writes and reads.
pub const VERSION: u16 = 1;
/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = 24;
/// Segment addresses and sizes are multiples of this.
pub const PAGE_SIZE: u64 = abi::PAGE_SIZE as u64;

/// The rights bits a segment may carry: read, write, execute (`abi::Rights` values).
const SEGMENT_RIGHTS: u8 = abi::Rights::READ.0 | abi::Rights::WRITE.0 | abi::Rights::EXECUTE.0;

/// One loadable segment of a domain image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentEntry {
    /// Virtual address of the first byte (page-aligned).
    pub vaddr: u64,
    /// Bytes of address space the segment occupies (a non-zero multiple of the page size).
    pub mem_size: u64,
    /// Offset of the segment's bytes from the start of the data area.
    pub file_offset: u64,
    /// Bytes stored in the image; the remaining `mem_size - file_size` bytes are zero.
    pub file_size: u64,
    /// `abi::Rights` bits: `READ` = 1, `WRITE` = 2, `EXECUTE` = 4.
    pub rights: u8,
}

impl SegmentEntry {
    /// One past the segment's last address (`vaddr + mem_size`; cannot overflow once parsed).
    pub fn end(&self) -> u64 {
        self.vaddr.saturating_add(self.mem_size)
    }
    /// The segment's rights as the ABI type.
    pub fn rights(&self) -> abi::Rights {
        abi::Rights(self.rights)
    }
}

/// One domain instance: which app, where it starts, and its segments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageEntry {
    /// The domain's name (as in the manifest).
    pub domain: String,
    /// The app it runs (the package name under `userland/apps/`).
    pub app: String,
    /// Entry point (`_start`), an address inside an executable segment.
    pub entry: u64,
    /// Segments, sorted by address, non-overlapping.
    pub segments: Vec<SegmentEntry>,
}

/// What the directory holds. Private: readers go through [`BootImage`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Directory {
    manifest: Vec<u8>,
    images: Vec<ImageEntry>,
}

/// Why a blob is not a valid boot image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ImageError {
    /// Shorter than the header.
    TooShort {
        /// The blob's length.
        len: usize,
    },
    /// The magic is not `b"TSBI"`.
    BadMagic,
    /// A format version this code does not read.
    UnsupportedVersion {
        /// The version found.
        version: u16,
    },
    /// The reserved header field is not zero.
    ReservedNotZero,
    /// The header's total length is not the blob's length.
    LengthMismatch {
        /// Length recorded in the header.
        header: u64,
        /// Length of the blob.
        actual: u64,
    },
    /// The CRC of everything after the header does not match the header's.
    BadChecksum {
        /// CRC recorded in the header.
        header: u32,
        /// CRC computed over the blob.
        actual: u32,
    },
    /// The directory length runs past the end of the blob.
    DirectoryOutOfBounds {
        /// Directory length recorded in the header.
        len: u32,
    },
    /// The directory does not decode.
    BadDirectory,
    /// The directory decodes but leaves bytes unread.
    TrailingDirectoryBytes {
        /// How many bytes are left over.
        extra: usize,
    },
    /// An image has an empty domain name.
    EmptyDomainName {
        /// Index of the image.
        image: usize,
    },
    /// Two images name the same domain.
    DuplicateDomain {
        /// Index of the second image with the name.
        image: usize,
    },
    /// An image has no segments.
    NoSegments {
        /// Index of the image.
        image: usize,
    },
    /// A segment's rights are empty, have bits other than read/write/execute, or are both
    /// writable and executable.
    BadRights {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
        /// The rights bits found.
        rights: u8,
    },
    /// A segment has `mem_size == 0`.
    EmptySegment {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
    },
    /// A segment's `vaddr` or `mem_size` is not a multiple of the page size.
    UnalignedSegment {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
    },
    /// `vaddr + mem_size` or `file_offset + file_size` overflows.
    Overflow {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
    },
    /// A segment stores more bytes than it occupies.
    FileLargerThanMemory {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
    },
    /// A segment's file range lies (partly) outside the data area.
    FileOutOfBounds {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
    },
    /// A segment starts below the previous one.
    SegmentsUnsorted {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
    },
    /// A segment starts before the previous one ends.
    SegmentsOverlap {
        /// Index of the image.
        image: usize,
        /// Index of the segment within the image.
        segment: usize,
    },
    /// The entry point is not inside an executable segment of its image.
    EntryNotExecutable {
        /// Index of the image.
        image: usize,
    },
    /// Two images' address ranges overlap.
    ImagesOverlap {
        /// Index of one image.
        first: usize,
        /// Index of the other.
        second: usize,
    },
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ImageError::*;
        match *self {
            TooShort { len } => {
                write!(f, "boot image of {len} bytes is shorter than its {HEADER_LEN}-byte header")
            }
            BadMagic => write!(f, "not a boot image (bad magic)"),
            UnsupportedVersion { version } => {
                write!(f, "boot image version {version} is not supported (expected {VERSION})")
            }
            ReservedNotZero => write!(f, "boot image header: reserved field is not zero"),
            LengthMismatch { header, actual } => {
                write!(f, "boot image header says {header} bytes, but the blob has {actual}")
            }
            BadChecksum { header, actual } => {
                write!(
                    f,
                    "boot image checksum mismatch: header {header:#010x}, data {actual:#010x}"
                )
            }
            DirectoryOutOfBounds { len } => {
                write!(f, "boot image directory of {len} bytes runs past the end")
            }
            BadDirectory => write!(f, "boot image directory does not decode"),
            TrailingDirectoryBytes { extra } => {
                write!(f, "boot image directory has {extra} bytes left over after decoding")
            }
            EmptyDomainName { image } => write!(f, "image {image}: empty domain name"),
            DuplicateDomain { image } => {
                write!(f, "image {image}: domain name already used by an earlier image")
            }
            NoSegments { image } => write!(f, "image {image}: no segments"),
            BadRights { image, segment, rights } => write!(
                f,
                "image {image} segment {segment}: invalid rights {rights:#x} (need a non-empty \
                 subset of read=1, write=2, execute=4, not both write and execute)"
            ),
            EmptySegment { image, segment } => {
                write!(f, "image {image} segment {segment}: zero memory size")
            }
            UnalignedSegment { image, segment } => write!(
                f,
                "image {image} segment {segment}: address or size not a multiple of {PAGE_SIZE}"
            ),
            Overflow { image, segment } => {
                write!(f, "image {image} segment {segment}: address or file range overflows")
            }
            FileLargerThanMemory { image, segment } => {
                write!(f, "image {image} segment {segment}: file size exceeds memory size")
            }
            FileOutOfBounds { image, segment } => {
                write!(f, "image {image} segment {segment}: file range outside the data area")
            }
            SegmentsUnsorted { image, segment } => {
                write!(f, "image {image} segment {segment}: starts below the previous segment")
            }
            SegmentsOverlap { image, segment } => {
                write!(f, "image {image} segment {segment}: overlaps the previous segment")
            }
            EntryNotExecutable { image } => {
                write!(f, "image {image}: entry point is not in an executable segment")
            }
            ImagesOverlap { first, second } => {
                write!(f, "images {first} and {second} overlap in the address space")
            }
        }
    }
}

impl core::error::Error for ImageError {}

/// A validated boot image, borrowing the blob it was parsed from.
#[derive(Clone, Debug)]
pub struct BootImage<'a> {
    directory: Directory,
    data: &'a [u8],
}

impl<'a> BootImage<'a> {
    /// Parses and validates `bytes`, which must be exactly one boot image (see the crate
    /// documentation for everything that is checked).
    pub fn parse(bytes: &'a [u8]) -> Result<BootImage<'a>, ImageError> {
        let header: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(ImageError::TooShort { len: bytes.len() })?;
        if header[0..4] != MAGIC {
            return Err(ImageError::BadMagic);
        }
        let version = u16::from_le_bytes([header[4], header[5]]);
        if version != VERSION {
            return Err(ImageError::UnsupportedVersion { version });
        }
        if header[6..8] != [0, 0] {
            return Err(ImageError::ReservedNotZero);
        }
        let dir_len = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        let mut total = [0u8; 8];
        total.copy_from_slice(&header[12..20]);
        let total = u64::from_le_bytes(total);
        let crc = u32::from_le_bytes([header[20], header[21], header[22], header[23]]);

        let actual_len = bytes.len() as u64;
        if total != actual_len {
            return Err(ImageError::LengthMismatch { header: total, actual: actual_len });
        }
        let body = &bytes[HEADER_LEN..];
        let actual_crc = crc32fast::hash(body);
        if actual_crc != crc {
            return Err(ImageError::BadChecksum { header: crc, actual: actual_crc });
        }
        let dir_bytes = usize::try_from(dir_len)
            .ok()
            .and_then(|len| body.get(..len))
            .ok_or(ImageError::DirectoryOutOfBounds { len: dir_len })?;
        let data = &body[dir_bytes.len()..];
        let (directory, rest) = postcard::take_from_bytes::<Directory>(dir_bytes)
            .map_err(|_| ImageError::BadDirectory)?;
        if !rest.is_empty() {
            return Err(ImageError::TrailingDirectoryBytes { extra: rest.len() });
        }
        validate(&directory, data.len() as u64)?;
        Ok(BootImage { directory, data })
    }

    /// The compiled manifest (opaque to this crate).
    pub fn manifest(&self) -> &[u8] {
        &self.directory.manifest
    }

    /// The domain images, in the order they were added.
    pub fn images(&self) -> &[ImageEntry] {
        &self.directory.images
    }

    /// The stored bytes of `segment` (`file_size` of them), which must be one of this image's
    /// segments; a segment from elsewhere whose file range lies outside the data area yields an
    /// empty slice.
    pub fn segment_data(&self, segment: &SegmentEntry) -> &'a [u8] {
        let range = usize::try_from(segment.file_offset).ok().and_then(|start| {
            let len = usize::try_from(segment.file_size).ok()?;
            Some(start..start.checked_add(len)?)
        });
        range.and_then(|r| self.data.get(r)).unwrap_or(&[])
    }
}

/// Checks every image and segment of `dir` against a data area of `data_len` bytes.
fn validate(dir: &Directory, data_len: u64) -> Result<(), ImageError> {
    let mut extents: Vec<(u64, u64, usize)> = Vec::with_capacity(dir.images.len());
    for (i, image) in dir.images.iter().enumerate() {
        if image.domain.is_empty() {
            return Err(ImageError::EmptyDomainName { image: i });
        }
        if dir.images[..i].iter().any(|other| other.domain == image.domain) {
            return Err(ImageError::DuplicateDomain { image: i });
        }
        if image.segments.is_empty() {
            return Err(ImageError::NoSegments { image: i });
        }
        let entry = image.entry;
        let mut previous: Option<&SegmentEntry> = None;
        let mut entry_ok = false;
        for (s, seg) in image.segments.iter().enumerate() {
            let (image, segment) = (i, s);
            let rights = seg.rights;
            let write_exec = abi::Rights::WRITE.0 | abi::Rights::EXECUTE.0;
            if rights == 0 || rights & !SEGMENT_RIGHTS != 0 || rights & write_exec == write_exec {
                return Err(ImageError::BadRights { image, segment, rights });
            }
            if seg.mem_size == 0 {
                return Err(ImageError::EmptySegment { image, segment });
            }
            if !seg.vaddr.is_multiple_of(PAGE_SIZE) || !seg.mem_size.is_multiple_of(PAGE_SIZE) {
                return Err(ImageError::UnalignedSegment { image, segment });
            }
            let end = seg.vaddr.checked_add(seg.mem_size);
            let file_end = seg.file_offset.checked_add(seg.file_size);
            let (Some(end), Some(file_end)) = (end, file_end) else {
                return Err(ImageError::Overflow { image, segment });
            };
            if seg.file_size > seg.mem_size {
                return Err(ImageError::FileLargerThanMemory { image, segment });
            }
            if file_end > data_len {
                return Err(ImageError::FileOutOfBounds { image, segment });
            }
            if let Some(prev) = previous {
                if seg.vaddr < prev.vaddr {
                    return Err(ImageError::SegmentsUnsorted { image, segment });
                }
                // `prev.end()` did not overflow: it was checked on the previous round.
                if seg.vaddr < prev.end() {
                    return Err(ImageError::SegmentsOverlap { image, segment });
                }
            }
            if rights & abi::Rights::EXECUTE.0 != 0 && (seg.vaddr..end).contains(&entry) {
                entry_ok = true;
            }
            previous = Some(seg);
        }
        if !entry_ok {
            return Err(ImageError::EntryNotExecutable { image: i });
        }
        // Sorted and non-overlapping, so the first segment starts and the last one ends the
        // image's extent.
        let start = image.segments[0].vaddr;
        let end = previous.map_or(start, SegmentEntry::end);
        extents.push((start, end, i));
    }
    extents.sort_unstable();
    for pair in extents.windows(2) {
        let ((_, end, first), (start, _, second)) = (pair[0], pair[1]);
        if start < end {
            return Err(ImageError::ImagesOverlap { first, second });
        }
    }
    Ok(())
}

/// One segment to add to an image: `(vaddr, mem_size, rights, data)`, where `data` holds the
/// first `data.len()` bytes and the rest of `mem_size` is zero.
pub type SegmentSpec = (u64, u64, u8, Vec<u8>);

/// Builds a boot image (used by xtask on the host; needs only `alloc`).
///
/// The builder does not validate: `finish` encodes whatever it was given, and xtask parses the
/// result with [`BootImage::parse`] before using it, so both sides apply the same rules.
#[derive(Clone, Debug)]
pub struct BootImageBuilder {
    directory: Directory,
    data: Vec<u8>,
}

impl BootImageBuilder {
    /// A builder for an image carrying the compiled `manifest`.
    pub fn new(manifest: Vec<u8>) -> BootImageBuilder {
        BootImageBuilder { directory: Directory { manifest, images: Vec::new() }, data: Vec::new() }
    }

    /// Adds the image of domain `domain` running `app`, starting at `entry`, with `segments`
    /// in the order given (the parser requires them sorted by address).
    pub fn add_image(
        mut self,
        domain: impl Into<String>,
        app: impl Into<String>,
        entry: u64,
        segments: Vec<SegmentSpec>,
    ) -> BootImageBuilder {
        let segments = segments
            .into_iter()
            .map(|(vaddr, mem_size, rights, data)| {
                let file_offset = self.data.len() as u64;
                self.data.extend_from_slice(&data);
                SegmentEntry { vaddr, mem_size, file_offset, file_size: data.len() as u64, rights }
            })
            .collect();
        self.directory.images.push(ImageEntry {
            domain: domain.into(),
            app: app.into(),
            entry,
            segments,
        });
        self
    }

    /// Encodes the image: header, directory, data.
    ///
    /// # Panics
    /// If the encoded directory exceeds 4 GiB (its length field is a `u32`).
    pub fn finish(self) -> Vec<u8> {
        let directory = postcard::to_allocvec(&self.directory)
            .expect("postcard encodes a directory of vectors and strings into a Vec");
        assemble(&directory, &self.data)
    }
}

/// Puts a header in front of an encoded directory and the data area.
fn assemble(directory: &[u8], data: &[u8]) -> Vec<u8> {
    let dir_len = u32::try_from(directory.len()).expect("boot image directory exceeds 4 GiB");
    let total = (HEADER_LEN + directory.len() + data.len()) as u64;
    let mut crc = crc32fast::Hasher::new();
    crc.update(directory);
    crc.update(data);
    let mut out = Vec::with_capacity(HEADER_LEN + directory.len() + data.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&dir_len.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(directory);
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests;
