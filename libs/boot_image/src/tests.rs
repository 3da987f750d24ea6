//! Host tests: round trip, corruption, truncation and every validation rule.

use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

use super::*;

const R: u8 = 1;
const RW: u8 = 3;
const RX: u8 = 5;

/// A small valid image: two domains, text + rodata + data/bss each.
fn small() -> Vec<u8> {
    BootImageBuilder::new(b"manifest!".to_vec())
        .add_image(
            "a",
            "hello",
            0x1_0000_0010,
            vec![
                (0x1_0000_0000, 0x1000, RX, vec![0x13, 0, 0, 0, 0x73, 0, 0x10, 0]),
                (0x1_0000_1000, 0x1000, R, b"rodata".to_vec()),
                (0x1_0000_2000, 0x3000, RW, vec![7; 5]),
            ],
        )
        .add_image(
            "b",
            "hello",
            0x1_4000_0000,
            vec![(0x1_4000_0000, 0x1000, RX, vec![1, 2, 3]), (0x1_4000_1000, 0x2000, RW, vec![])],
        )
        .finish()
}

/// Encodes `dir` and `data` with a correct header, bypassing the builder.
fn raw(dir: &Directory, data: &[u8]) -> Vec<u8> {
    assemble(&postcard::to_allocvec(dir).unwrap(), data)
}

/// A directory with one image whose segments are `segments`, entry at the first one.
fn one_image(segments: Vec<SegmentEntry>) -> Directory {
    let entry = segments.first().map_or(0, |s| s.vaddr);
    Directory {
        manifest: vec![],
        images: vec![ImageEntry {
            domain: "d".to_string(),
            app: "app".to_string(),
            entry,
            segments,
        }],
    }
}

fn seg(vaddr: u64, mem_size: u64, file_offset: u64, file_size: u64, rights: u8) -> SegmentEntry {
    SegmentEntry { vaddr, mem_size, file_offset, file_size, rights }
}

fn parse_err(bytes: &[u8]) -> ImageError {
    BootImage::parse(bytes).expect_err("image should be rejected")
}

#[test]
fn round_trip() {
    let bytes = small();
    let image = BootImage::parse(&bytes).unwrap();
    assert_eq!(image.manifest(), b"manifest!");
    let images = image.images();
    assert_eq!(images.len(), 2);
    assert_eq!(images[0].domain, "a");
    assert_eq!(images[0].app, "hello");
    assert_eq!(images[0].entry, 0x1_0000_0010);
    assert_eq!(images[0].segments.len(), 3);
    let text = &images[0].segments[0];
    assert_eq!((text.vaddr, text.mem_size, text.rights), (0x1_0000_0000, 0x1000, RX));
    assert_eq!(image.segment_data(text), &[0x13, 0, 0, 0, 0x73, 0, 0x10, 0]);
    assert_eq!(image.segment_data(&images[0].segments[1]), b"rodata");
    assert_eq!(image.segment_data(&images[0].segments[2]), &[7; 5]);
    assert_eq!(images[1].segments[1].file_size, 0);
    assert_eq!(image.segment_data(&images[1].segments[1]), &[] as &[u8]);
    assert_eq!(images[1].segments[1].rights(), abi::Rights(RW));
    assert_eq!(images[1].segments[1].end(), 0x1_4000_3000);
}

#[test]
fn header_layout() {
    let bytes = small();
    assert_eq!(&bytes[..4], b"TSBI");
    assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), VERSION);
    assert_eq!(u64::from_le_bytes(bytes[12..20].try_into().unwrap()), bytes.len() as u64);
    let crc = u32::from_le_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!(crc, crc32fast::hash(&bytes[HEADER_LEN..]));
}

#[test]
fn empty_image_is_valid() {
    let bytes = BootImageBuilder::new(vec![]).finish();
    let image = BootImage::parse(&bytes).unwrap();
    assert!(image.manifest().is_empty());
    assert!(image.images().is_empty());
}

#[test]
fn every_single_byte_corruption_is_rejected() {
    let bytes = small();
    for i in 0..bytes.len() {
        for x in 1..=255u8 {
            let mut bad = bytes.clone();
            bad[i] ^= x;
            assert!(BootImage::parse(&bad).is_err(), "byte {i} xor {x:#x} was accepted");
        }
    }
}

#[test]
fn truncation_and_extension_are_rejected() {
    let bytes = small();
    for len in 0..bytes.len() {
        let err = parse_err(&bytes[..len]);
        if len < HEADER_LEN {
            assert_eq!(err, ImageError::TooShort { len });
        } else {
            assert!(matches!(err, ImageError::LengthMismatch { .. }), "{err:?}");
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(parse_err(&longer), ImageError::LengthMismatch { .. }));
}

#[test]
fn header_fields_are_checked() {
    let mut bytes = small();
    bytes[0] = b'X';
    assert_eq!(parse_err(&bytes), ImageError::BadMagic);
    let mut bytes = small();
    bytes[4] = 2;
    assert_eq!(parse_err(&bytes), ImageError::UnsupportedVersion { version: 2 });
    let mut bytes = small();
    bytes[7] = 1;
    assert_eq!(parse_err(&bytes), ImageError::ReservedNotZero);
    let mut bytes = small();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    assert!(matches!(parse_err(&bytes), ImageError::BadChecksum { .. }));
}

#[test]
fn directory_length_is_checked() {
    let dir = one_image(vec![seg(0x1000, 0x1000, 0, 0, RX)]);
    let encoded = postcard::to_allocvec(&dir).unwrap();
    // Claims more directory than there are bytes.
    let mut bytes = assemble(&encoded, &[]);
    bytes[8..12].copy_from_slice(&(encoded.len() as u32 + 1).to_le_bytes());
    assert_eq!(
        parse_err(&bytes),
        ImageError::DirectoryOutOfBounds { len: encoded.len() as u32 + 1 }
    );
    // Directory followed by a stray byte counted as directory.
    let mut padded = encoded.clone();
    padded.push(0);
    assert_eq!(parse_err(&assemble(&padded, &[])), ImageError::TrailingDirectoryBytes { extra: 1 });
    // Directory cut short.
    let cut = &encoded[..encoded.len() - 1];
    assert_eq!(parse_err(&assemble(cut, &[])), ImageError::BadDirectory);
}

#[test]
fn overlapping_and_unsorted_segments_are_rejected() {
    let overlap = one_image(vec![seg(0x1000, 0x2000, 0, 0, RX), seg(0x2000, 0x1000, 0, 0, R)]);
    assert_eq!(
        parse_err(&raw(&overlap, &[])),
        ImageError::SegmentsOverlap { image: 0, segment: 1 }
    );
    let same = one_image(vec![seg(0x1000, 0x1000, 0, 0, RX), seg(0x1000, 0x1000, 0, 0, R)]);
    assert_eq!(parse_err(&raw(&same, &[])), ImageError::SegmentsOverlap { image: 0, segment: 1 });
    let unsorted = one_image(vec![seg(0x3000, 0x1000, 0, 0, RX), seg(0x1000, 0x1000, 0, 0, R)]);
    assert_eq!(
        parse_err(&raw(&unsorted, &[])),
        ImageError::SegmentsUnsorted { image: 0, segment: 1 }
    );
    // Adjacent is fine.
    let adjacent = one_image(vec![seg(0x1000, 0x1000, 0, 0, RX), seg(0x2000, 0x1000, 0, 0, R)]);
    BootImage::parse(&raw(&adjacent, &[])).unwrap();
}

#[test]
fn file_range_out_of_bounds_is_rejected() {
    let data = [0u8; 16];
    let ok = one_image(vec![seg(0x1000, 0x1000, 8, 8, RX)]);
    BootImage::parse(&raw(&ok, &data)).unwrap();
    for (offset, size) in [(8, 9), (16, 1), (17, 0), (u64::MAX, 0)] {
        let dir = one_image(vec![seg(0x1000, 0x1000, offset, size, RX)]);
        assert_eq!(
            parse_err(&raw(&dir, &data)),
            ImageError::FileOutOfBounds { image: 0, segment: 0 },
            "offset {offset} size {size}"
        );
    }
    let wraps = one_image(vec![seg(0x1000, 0x1000, u64::MAX, 2, RX)]);
    assert_eq!(parse_err(&raw(&wraps, &data)), ImageError::Overflow { image: 0, segment: 0 });
}

#[test]
fn segment_rules() {
    let data = [0u8; 0x2000];
    let check = |s: SegmentEntry, want: ImageError| {
        assert_eq!(parse_err(&raw(&one_image(vec![s]), &data)), want);
    };
    let at = (0, 0);
    let (image, segment) = at;
    check(seg(0x1000, 0, 0, 0, RX), ImageError::EmptySegment { image, segment });
    check(seg(0x1001, 0x1000, 0, 0, RX), ImageError::UnalignedSegment { image, segment });
    check(seg(0x1000, 0x1001, 0, 0, RX), ImageError::UnalignedSegment { image, segment });
    check(seg(0x1000, 0x1000, 0, 0x1001, RX), ImageError::FileLargerThanMemory { image, segment });
    check(seg(u64::MAX - 0xfff, 0x2000, 0, 0, RX), ImageError::Overflow { image, segment });
    for rights in [0, 8, 0x10, 6, 7, 0x85] {
        check(seg(0x1000, 0x1000, 0, 0, rights), ImageError::BadRights { image, segment, rights });
    }
    // The end of a segment must be representable: one ending at 2^64 is refused too.
    check(seg(u64::MAX - 0xfff, 0x1000, 0, 0, RX), ImageError::Overflow { image, segment });
    BootImage::parse(&raw(&one_image(vec![seg(u64::MAX - 0x1fff, 0x1000, 0, 0, RX)]), &data))
        .unwrap();
}

#[test]
fn entry_must_be_executable() {
    let mut dir = one_image(vec![seg(0x1000, 0x1000, 0, 0, RX), seg(0x2000, 0x1000, 0, 0, RW)]);
    for entry in [0x2000, 0xfff, 0x3000] {
        dir.images[0].entry = entry;
        assert_eq!(parse_err(&raw(&dir, &[])), ImageError::EntryNotExecutable { image: 0 });
    }
    dir.images[0].entry = 0x1ffe;
    BootImage::parse(&raw(&dir, &[])).unwrap();
    dir.images[0].segments.clear();
    assert_eq!(parse_err(&raw(&dir, &[])), ImageError::NoSegments { image: 0 });
}

#[test]
fn images_are_checked_against_each_other() {
    let two = |name_b: &str, base_b: u64| {
        BootImageBuilder::new(vec![])
            .add_image("a", "x", 0x10_0000, vec![(0x10_0000, 0x3000, RX, vec![])])
            .add_image(name_b, "x", base_b, vec![(base_b, 0x2000, RX, vec![])])
            .finish()
    };
    assert_eq!(parse_err(&two("a", 0x20_0000)), ImageError::DuplicateDomain { image: 1 });
    assert_eq!(parse_err(&two("", 0x20_0000)), ImageError::EmptyDomainName { image: 1 });
    assert_eq!(parse_err(&two("b", 0x10_2000)), ImageError::ImagesOverlap { first: 0, second: 1 });
    assert_eq!(parse_err(&two("b", 0xf_f000)), ImageError::ImagesOverlap { first: 1, second: 0 });
    BootImage::parse(&two("b", 0x10_3000)).unwrap();
    BootImage::parse(&two("b", 0xf_e000)).unwrap();
}

#[test]
fn errors_display() {
    let text = ImageError::BadRights { image: 1, segment: 2, rights: 6 }.to_string();
    assert!(text.contains("image 1 segment 2") && text.contains("0x6"), "{text}");
    assert!(ImageError::TooShort { len: 3 }.to_string().contains("3 bytes"));
}
