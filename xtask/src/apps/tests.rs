//! Tests of relocation and packing on small synthetic ELF files, and (ignored by default, it
//! builds the apps) on the real apps.

use object::pod::bytes_of;
use object::{I64, U16, U32, U64};

use super::*;

const RX: u32 = elf::PF_R | elf::PF_X;
const RW: u32 = elf::PF_R | elf::PF_W;
const R: u32 = elf::PF_R;

/// A loadable segment of a synthetic ELF.
struct Seg {
    vaddr: u64,
    flags: u32,
    data: Vec<u8>,
    mem_size: u64,
}

fn seg(vaddr: u64, flags: u32, data: Vec<u8>, mem_size: u64) -> Seg {
    Seg { vaddr, flags, data, mem_size }
}

/// A synthetic RISC-V static PIE.
struct Synth {
    e_type: u16,
    machine: u16,
    entry: u64,
    loads: Vec<Seg>,
    /// `(offset, symbol, type, addend)`.
    relas: Vec<(u64, u32, u32, i64)>,
    /// Dynamic entries besides `DT_RELA*` and `DT_NULL`.
    extra_dyn: Vec<(u32, u64)>,
    /// Extra program headers of these types (empty contents).
    extra_phdrs: Vec<u32>,
    /// Leave out `PT_DYNAMIC`.
    no_dynamic: bool,
}

impl Synth {
    /// Text at 0 (entry 0x10), rodata at 0x1000, data at 0x2000 (0x40 file bytes of 0xaa, plus
    /// 0x1800 of bss), two relative relocations in the data.
    fn new() -> Synth {
        Synth {
            e_type: elf::ET_DYN,
            machine: elf::EM_RISCV,
            entry: 0x10,
            loads: vec![
                seg(0, RX, vec![0x13; 0x20], 0x20),
                seg(0x1000, R, b"constant".to_vec(), 8),
                seg(0x2000, RW, vec![0xaa; 0x40], 0x1840),
            ],
            relas: vec![
                (0x2008, 0, elf::R_RISCV_RELATIVE, 0x1000),
                (0x2030, 0, elf::R_RISCV_RELATIVE, 0x2044),
            ],
            extra_dyn: vec![],
            extra_phdrs: vec![],
            no_dynamic: false,
        }
    }

    /// The ELF bytes: header and program headers, then each segment at file offset
    /// `0x1000 * (k + 1)`, then a read-only segment holding the relocation and dynamic tables
    /// at the first free page after the others.
    fn build(&self) -> Vec<u8> {
        let le = LE;
        let top = self.loads.iter().map(|s| s.vaddr + s.mem_size).max().unwrap_or(0);
        let tables_vaddr = top.next_multiple_of(PAGE);
        let mut tables = Vec::new();
        for &(offset, sym, r_type, addend) in &self.relas {
            let rela = elf::Rela64 {
                r_offset: U64::new(le, offset),
                r_info: U64::new(le, (u64::from(sym) << 32) | u64::from(r_type)),
                r_addend: I64::new(le, addend),
            };
            tables.extend_from_slice(bytes_of(&rela));
        }
        let dyn_at = tables.len() as u64;
        let mut dyns = vec![
            (elf::DT_RELA, tables_vaddr),
            (elf::DT_RELASZ, 24 * self.relas.len() as u64),
            (elf::DT_RELAENT, 24),
        ];
        dyns.extend(self.extra_dyn.iter().copied());
        dyns.push((elf::DT_NULL, 0));
        for (tag, val) in dyns {
            let d = elf::Dyn64 { d_tag: U64::new(le, u64::from(tag)), d_val: U64::new(le, val) };
            tables.extend_from_slice(bytes_of(&d));
        }

        let mut loads: Vec<(&[u8], u64, u64, u32)> =
            self.loads.iter().map(|s| (&s.data[..], s.vaddr, s.mem_size, s.flags)).collect();
        loads.push((&tables, tables_vaddr, tables.len() as u64, R));
        let phnum = loads.len() + usize::from(!self.no_dynamic) + self.extra_phdrs.len();
        let mut out = vec![0u8; 0x1000 * (loads.len() + 1)];
        let mut phdrs = Vec::new();
        let ph = |p_type, flags, offset, vaddr, filesz, memsz| elf::ProgramHeader64::<LE> {
            p_type: U32::new(le, p_type),
            p_flags: U32::new(le, flags),
            p_offset: U64::new(le, offset),
            p_vaddr: U64::new(le, vaddr),
            p_paddr: U64::new(le, vaddr),
            p_filesz: U64::new(le, filesz),
            p_memsz: U64::new(le, memsz),
            p_align: U64::new(le, PAGE),
        };
        for (k, (data, vaddr, mem_size, flags)) in loads.iter().enumerate() {
            let offset = 0x1000 * (k as u64 + 1);
            out[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            phdrs.push(ph(elf::PT_LOAD, *flags, offset, *vaddr, data.len() as u64, *mem_size));
        }
        let tables_offset = 0x1000 * loads.len() as u64;
        if !self.no_dynamic {
            let len = tables.len() as u64 - dyn_at;
            let at = tables_offset + dyn_at;
            phdrs.push(ph(elf::PT_DYNAMIC, RW, at, tables_vaddr + dyn_at, len, len));
        }
        for &p_type in &self.extra_phdrs {
            phdrs.push(ph(p_type, R, tables_offset, tables_vaddr, 0, 0));
        }
        let header = elf::FileHeader64::<LE> {
            e_ident: elf::Ident {
                magic: elf::ELFMAG,
                class: elf::ELFCLASS64,
                data: elf::ELFDATA2LSB,
                version: elf::EV_CURRENT,
                os_abi: elf::ELFOSABI_NONE,
                abi_version: 0,
                padding: [0; 7],
            },
            e_type: U16::new(le, self.e_type),
            e_machine: U16::new(le, self.machine),
            e_version: U32::new(le, u32::from(elf::EV_CURRENT)),
            e_entry: U64::new(le, self.entry),
            e_phoff: U64::new(le, 64),
            e_shoff: U64::new(le, 0),
            e_flags: U32::new(le, 0),
            e_ehsize: U16::new(le, 64),
            e_phentsize: U16::new(le, 56),
            e_phnum: U16::new(le, phnum as u16),
            e_shentsize: U16::new(le, 64),
            e_shnum: U16::new(le, 0),
            e_shstrndx: U16::new(le, 0),
        };
        out[..64].copy_from_slice(bytes_of(&header));
        for (k, p) in phdrs.iter().enumerate() {
            out[64 + 56 * k..64 + 56 * (k + 1)].copy_from_slice(bytes_of(p));
        }
        out
    }
}

const BASE_A: u64 = abi::IMAGE_BASE as u64;
const BASE_B: u64 = abi::IMAGE_BASE as u64 + 7 * abi::IMAGE_SLOT as u64;

fn err(synth: &Synth) -> String {
    format!("{:#}", relocate(&synth.build(), BASE_A).expect_err("relocation should fail"))
}

#[test]
fn relocates_segments_rights_and_entry() {
    let r = relocate(&Synth::new().build(), BASE_A).unwrap();
    assert_eq!(r.entry, BASE_A + 0x10);
    let table: Vec<(u64, u64, u8, usize)> =
        r.segments.iter().map(|(v, m, rights, d)| (*v, *m, *rights, d.len())).collect();
    assert_eq!(
        table,
        [
            (BASE_A, 0x1000, 5, 0x20),
            (BASE_A + 0x1000, 0x1000, 1, 8),
            (BASE_A + 0x2000, 0x2000, 3, 0x40),
            (BASE_A + 0x4000, 0x1000, 1, 24 * 2 + 16 * 4),
        ]
    );
    assert_eq!(r.end(), BASE_A + 0x5000);
}

#[test]
fn two_bases_differ_exactly_at_relocated_words() {
    let elf_bytes = Synth::new().build();
    let a = relocate(&elf_bytes, BASE_A).unwrap();
    let b = relocate(&elf_bytes, BASE_B).unwrap();
    assert_eq!(a.segments.len(), b.segments.len());
    for (sa, sb) in a.segments.iter().zip(&b.segments) {
        assert_eq!(sa.0 - BASE_A, sb.0 - BASE_B);
        assert_eq!((sa.1, sa.2, sa.3.len()), (sb.1, sb.2, sb.3.len()));
        let differing: Vec<usize> = (0..sa.3.len()).filter(|&i| sa.3[i] != sb.3[i]).collect();
        if sa.0 == BASE_A + 0x2000 {
            // Words at 0x8 and 0x30 of the data segment, and nothing else.
            let words = |off: usize| off..off + 8;
            assert!(differing.iter().all(|i| words(0x8).contains(i) || words(0x30).contains(i)));
            let word =
                |d: &[u8], off: usize| u64::from_le_bytes(d[off..off + 8].try_into().unwrap());
            assert_eq!(word(&sa.3, 0x8), BASE_A + 0x1000);
            assert_eq!(word(&sb.3, 0x8), BASE_B + 0x1000);
            assert_eq!(word(&sa.3, 0x30), BASE_A + 0x2044);
            assert_eq!(word(&sb.3, 0x30), BASE_B + 0x2044);
            assert!(sa.3[..8].iter().chain(&sa.3[0x10..0x30]).all(|&x| x == 0xaa));
        } else {
            assert!(differing.is_empty(), "segment at {:#x} differs", sa.0);
        }
    }
}

#[test]
fn unaligned_segments_are_padded_to_pages() {
    let mut s = Synth::new();
    s.loads[1] = seg(0x1234, R, vec![1, 2, 3], 3);
    s.loads[2] = seg(0x2ff8, RW, vec![4; 16], 16);
    s.relas.clear();
    let r = relocate(&s.build(), BASE_A).unwrap();
    let (v, m, _, d) = &r.segments[1];
    assert_eq!((*v, *m, d.len()), (BASE_A + 0x1000, 0x1000, 0x237));
    assert!(d[..0x234].iter().all(|&b| b == 0) && d[0x234..] == [1, 2, 3]);
    // 0x2ff8 + 16 crosses into a second page.
    assert_eq!((r.segments[2].0, r.segments[2].1), (BASE_A + 0x2000, 0x2000));
}

#[test]
fn same_rights_sharing_a_page_are_merged() {
    let mut s = Synth::new();
    s.loads.insert(2, seg(0x1800, R, vec![9; 4], 4));
    let r = relocate(&s.build(), BASE_A).unwrap();
    let (v, m, rights, d) = &r.segments[1];
    assert_eq!((*v, *m, *rights, d.len()), (BASE_A + 0x1000, 0x1000, 1, 0x804));
    assert_eq!(&d[..8], b"constant");
    assert!(d[8..0x800].iter().all(|&b| b == 0) && d[0x800..] == [9; 4]);
}

#[test]
fn different_rights_sharing_a_page_are_refused() {
    let mut s = Synth::new();
    s.loads[1] = seg(0x800, R, vec![1], 1);
    assert!(err(&s).contains("different rights share the page at 0x0"), "{}", err(&s));
}

#[test]
fn other_relocations_are_refused() {
    let mut s = Synth::new();
    s.relas.push((0x2010, 0, elf::R_RISCV_64, 0));
    assert!(err(&s).contains("type 2 (R_RISCV_64)"), "{}", err(&s));
    let mut s = Synth::new();
    s.relas.push((0x2010, 0, elf::R_RISCV_JUMP_SLOT, 0));
    assert!(err(&s).contains("R_RISCV_JUMP_SLOT"), "{}", err(&s));
    let mut s = Synth::new();
    s.relas[0].1 = 1;
    assert!(err(&s).contains("refers to the dynamic symbol `#1`"), "{}", err(&s));
    let mut s = Synth::new();
    s.relas.push((0x0, 0, elf::R_RISCV_NONE, 0));
    relocate(&s.build(), BASE_A).unwrap();
}

#[test]
fn relocation_targets_must_be_file_bytes() {
    for offset in [0x2039, 0x2040, 0x3000, 0x9000, u64::MAX - 3] {
        let mut s = Synth::new();
        s.relas[1].0 = offset;
        assert!(err(&s).contains("not inside a segment's file bytes"), "{offset:#x}: {}", err(&s));
    }
}

#[test]
fn dynamic_table_is_checked() {
    let cases: [(u32, u64, &str); 4] = [
        (elf::DT_NEEDED, 1, "DT_NEEDED"),
        (elf::DT_PLTRELSZ, 24, "REL or PLT"),
        (elf::DT_RELSZ, 16, "REL or PLT"),
        (DT_RELR as u32, 0x4000, "DT_RELR"),
    ];
    for (tag, val, want) in cases {
        let mut s = Synth::new();
        s.extra_dyn.push((tag, val));
        assert!(err(&s).contains(want), "tag {tag}: {}", err(&s));
    }
    let mut s = Synth::new();
    s.extra_dyn.push((elf::DT_RELAENT, 16));
    assert!(err(&s).contains("entry size"), "{}", err(&s));
    // Without PT_DYNAMIC (and so without relocations) the program is taken as it is.
    let mut s = Synth::new();
    s.no_dynamic = true;
    let r = relocate(&s.build(), BASE_A).unwrap();
    assert_eq!(&r.segments[2].3[8..16], &[0xaa; 8]);
}

#[test]
fn file_kinds_and_segments_are_checked() {
    let mut s = Synth::new();
    s.e_type = elf::ET_EXEC;
    assert!(err(&s).contains("not position-independent"), "{}", err(&s));
    let mut s = Synth::new();
    s.machine = elf::EM_X86_64;
    assert!(err(&s).contains("not a RISC-V"), "{}", err(&s));
    let mut s = Synth::new();
    s.extra_phdrs.push(elf::PT_INTERP);
    assert!(err(&s).contains("dynamic linker"), "{}", err(&s));
    let mut s = Synth::new();
    s.extra_phdrs.push(elf::PT_TLS);
    assert!(err(&s).contains("thread-local"), "{}", err(&s));
    let mut s = Synth::new();
    s.loads[0].flags = elf::PF_R | elf::PF_W | elf::PF_X;
    assert!(err(&s).contains("writable and executable"), "{}", err(&s));
    let mut s = Synth::new();
    s.entry = 0x2000;
    assert!(err(&s).contains("not in an executable segment"), "{}", err(&s));
    let mut s = Synth::new();
    s.loads[2].mem_size = 0x10;
    assert!(err(&s).contains("stores more bytes than it occupies"), "{}", err(&s));
    assert!(relocate(b"\x7fELF nonsense", BASE_A).is_err());
    assert!(relocate(&Synth::new().build(), BASE_A + 0x10).is_err());
}

/// Writes synthetic apps to a temporary directory and returns the app map.
fn synthetic_apps(dir: &std::path::Path, apps: &[(&str, &Synth)]) -> BTreeMap<String, PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    apps.iter()
        .map(|(name, synth)| {
            let path = dir.join(name);
            std::fs::write(&path, synth.build()).unwrap();
            (name.to_string(), path)
        })
        .collect()
}

#[test]
fn pack_places_instances_in_their_slots() {
    let dir = std::env::temp_dir().join(format!("tessera-pack-{}", std::process::id()));
    let small = Synth::new();
    let mut big = Synth::new();
    big.loads[2].mem_size = abi::IMAGE_SLOT as u64;
    let apps = synthetic_apps(&dir, &[("small", &small), ("big", &big)]);
    let instances: Vec<(String, String)> = [("a", "small"), ("b", "small"), ("c", "small")]
        .iter()
        .map(|(d, a)| (d.to_string(), a.to_string()))
        .collect();
    let bytes = pack(b"compiled".to_vec(), &instances, &apps).unwrap();
    let image = BootImage::parse(&bytes).unwrap();
    assert_eq!(image.manifest(), b"compiled");
    for (i, img) in image.images().iter().enumerate() {
        let base = abi::IMAGE_BASE as u64 + i as u64 * abi::IMAGE_SLOT as u64;
        assert_eq!((img.domain.as_str(), img.app.as_str()), (instances[i].0.as_str(), "small"));
        assert_eq!(img.entry, base + 0x10);
        assert_eq!(img.segments[0].vaddr, base);
        let data = image.segment_data(&img.segments[2]);
        assert_eq!(u64::from_le_bytes(data[8..16].try_into().unwrap()), base + 0x1000);
    }

    let too_big = [("x".to_string(), "big".to_string())];
    let e = format!("{:#}", pack(vec![], &too_big, &apps).unwrap_err());
    assert!(e.contains("more than its image slot"), "{e}");
    let unknown = [("x".to_string(), "nope".to_string())];
    let e = format!("{:#}", pack(vec![], &unknown, &apps).unwrap_err());
    assert!(e.contains("app `nope`, which does not exist"), "{e}");
    let mut bad = Synth::new();
    bad.relas.push((0x2010, 0, elf::R_RISCV_64, 0));
    let apps = synthetic_apps(&dir, &[("bad", &bad)]);
    let e = format!("{:#}", pack(vec![], &[("d".into(), "bad".into())], &apps).unwrap_err());
    assert!(e.contains("relocating app `bad` for domain `d`: relocation 2"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn app_names_lists_the_apps() {
    let names = app_names();
    for app in ["counter", "faulty", "hello"] {
        assert!(names.contains(&app.to_string()), "{names:?}");
    }
    assert!(names.is_sorted());
}

/// Builds the real apps, relocates each at two bases and prints their segment tables
/// (`cargo test -p xtask -- --ignored --nocapture real_apps`).
#[test]
#[ignore = "builds the apps for RISC-V"]
fn real_apps_relocate_at_two_bases() {
    let apps = build_apps(Build::Release).unwrap();
    for (name, path) in &apps {
        let bytes = std::fs::read(path).unwrap();
        let a = relocate(&bytes, BASE_A).unwrap();
        let b = relocate(&bytes, BASE_B).unwrap();
        println!("{name}: entry {:#x}", a.entry);
        for (v, m, r, d) in &a.segments {
            println!("  {v:#014x} {m:#8x} rights {r} file {:#x}", d.len());
        }
        assert_eq!(a.entry - BASE_A, b.entry - BASE_B);
        let rights: Vec<u8> = a.segments.iter().map(|s| s.2).collect();
        assert_eq!(rights, [5, 1, 3], "{name}: text, rodata, data");
        let mut words = 0;
        for (sa, sb) in a.segments.iter().zip(&b.segments) {
            assert_eq!((sa.0 - BASE_A, sa.1, sa.3.len()), (sb.0 - BASE_B, sb.1, sb.3.len()));
            // Every 8-byte word either is equal in both or holds base + x in each.
            for (wa, wb) in sa.3.chunks(8).zip(sb.3.chunks(8)) {
                if wa != wb {
                    let (x, y) = (u64::from_le_bytes(wa.try_into().unwrap()), {
                        u64::from_le_bytes(wb.try_into().unwrap())
                    });
                    assert_eq!(x - BASE_A, y - BASE_B, "{name}: word at {:#x}", sa.0);
                    assert!(x - BASE_A < a.end() - BASE_A, "{name}: points outside the image");
                    words += 1;
                }
            }
        }
        println!("  {words} relocated words");
        assert!(words > 0, "{name}: no relocations applied");
        pack(vec![], &[("d".into(), name.clone())], &apps).unwrap();
    }
}
