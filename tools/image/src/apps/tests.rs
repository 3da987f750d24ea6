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

/// A synthetic static PIE.
struct Synth {
    /// The architecture it is relocated for.
    arch: Arch,
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
            arch: Arch::Riscv64,
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

    /// The same for x86_64: its machine and its relative relocation.
    fn x86_64() -> Synth {
        let mut s = Synth::new();
        s.arch = Arch::X86_64;
        s.machine = elf::EM_X86_64;
        for r in &mut s.relas {
            r.2 = elf::R_X86_64_RELATIVE;
        }
        s
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
    format!("{:#}", relocate(synth.arch, &synth.build(), BASE_A).expect_err("should fail"))
}

/// Relocates `synth` at `base` for its architecture.
fn reloc(synth: &Synth, base: u64) -> Result<Relocated> {
    relocate(synth.arch, &synth.build(), base)
}

#[test]
fn relocates_segments_rights_and_entry() {
    let r = reloc(&Synth::new(), BASE_A).unwrap();
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
    let a = relocate(Arch::Riscv64, &elf_bytes, BASE_A).unwrap();
    let b = relocate(Arch::Riscv64, &elf_bytes, BASE_B).unwrap();
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
    let r = reloc(&s, BASE_A).unwrap();
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
    let r = reloc(&s, BASE_A).unwrap();
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
    reloc(&s, BASE_A).unwrap();
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
    let r = reloc(&s, BASE_A).unwrap();
    assert_eq!(&r.segments[2].3[8..16], &[0xaa; 8]);
}

#[test]
fn file_kinds_and_segments_are_checked() {
    let mut s = Synth::new();
    s.e_type = elf::ET_EXEC;
    assert!(err(&s).contains("not position-independent"), "{}", err(&s));
    let mut s = Synth::new();
    s.machine = elf::EM_X86_64;
    assert!(err(&s).contains("not an ELF file for RISC-V (machine 62, want 243)"), "{}", err(&s));
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
    assert!(relocate(Arch::Riscv64, b"\x7fELF nonsense", BASE_A).is_err());
    assert!(reloc(&Synth::new(), BASE_A + 0x10).is_err());
}

#[test]
fn x86_64_relative_relocations_are_applied() {
    let s = Synth::x86_64();
    let a = reloc(&s, BASE_A).unwrap();
    let b = reloc(&s, BASE_B).unwrap();
    assert_eq!((a.entry, b.entry), (BASE_A + 0x10, BASE_B + 0x10));
    let table: Vec<(u64, u64, u8)> = a.segments.iter().map(|(v, m, r, _)| (*v, *m, *r)).collect();
    assert_eq!(
        table,
        [
            (BASE_A, 0x1000, 5),
            (BASE_A + 0x1000, 0x1000, 1),
            (BASE_A + 0x2000, 0x2000, 3),
            (BASE_A + 0x4000, 0x1000, 1)
        ]
    );
    let word = |d: &[u8], off: usize| u64::from_le_bytes(d[off..off + 8].try_into().unwrap());
    let (da, db) = (&a.segments[2].3, &b.segments[2].3);
    assert_eq!((word(da, 0x8), word(db, 0x8)), (BASE_A + 0x1000, BASE_B + 0x1000));
    assert_eq!((word(da, 0x30), word(db, 0x30)), (BASE_A + 0x2044, BASE_B + 0x2044));
    assert_eq!(da[0x10..0x30], [0xaa; 0x20]);
    // R_X86_64_NONE is skipped.
    let mut s = Synth::x86_64();
    s.relas.push((0x2010, 0, elf::R_X86_64_NONE, 0));
    assert_eq!(reloc(&s, BASE_A).unwrap().segments[2].3[0x10..0x18], [0xaa; 8]);
}

#[test]
fn x86_64_other_relocations_are_refused_by_name() {
    let cases = [
        (elf::R_X86_64_64, "type 1 (R_X86_64_64)"),
        (elf::R_X86_64_PC32, "type 2 (R_X86_64_PC32)"),
        (elf::R_X86_64_GOT32, "type 3 (R_X86_64_GOT32)"),
        (elf::R_X86_64_COPY, "type 5 (R_X86_64_COPY)"),
        (elf::R_X86_64_GLOB_DAT, "type 6 (R_X86_64_GLOB_DAT)"),
        (elf::R_X86_64_JUMP_SLOT, "type 7 (R_X86_64_JUMP_SLOT)"),
        (elf::R_X86_64_32S, "type 11 (R_X86_64_32S)"),
        (elf::R_X86_64_TPOFF64, "type 18 (a TLS relocation)"),
        (elf::R_X86_64_IRELATIVE, "type 37 (R_X86_64_IRELATIVE)"),
        (elf::R_X86_64_RELATIVE64, "type 38 (R_X86_64_RELATIVE64)"),
        (200, "type 200 (an unsupported relocation)"),
    ];
    for (r_type, want) in cases {
        let mut s = Synth::x86_64();
        s.relas.push((0x2010, 0, r_type, 0));
        let e = err(&s);
        assert!(e.contains(&format!("relocation 2 at 0x2010 has {want}")), "{e}");
        assert!(e.contains("only R_X86_64_RELATIVE is supported in apps"), "{e}");
    }
    let mut s = Synth::x86_64();
    s.relas[0].1 = 1;
    assert!(err(&s).contains("refers to the dynamic symbol `#1`"), "{}", err(&s));
    let mut s = Synth::x86_64();
    s.extra_dyn.push((elf::DT_PLTRELSZ, 24));
    assert!(err(&s).contains("apps may only have RELA R_X86_64_RELATIVE"), "{}", err(&s));
    let mut s = Synth::x86_64();
    s.relas[1].0 = 0x2040;
    assert!(err(&s).contains("not inside a segment's file bytes"), "{}", err(&s));
}

#[test]
fn the_machine_must_be_the_architecture_s() {
    // A RISC-V file relocated for x86_64, and the other way round.
    let mut s = Synth::new();
    s.arch = Arch::X86_64;
    assert!(err(&s).contains("not an ELF file for x86_64 (machine 243, want 62)"), "{}", err(&s));
    let mut s = Synth::x86_64();
    s.arch = Arch::Riscv64;
    assert!(err(&s).contains("not an ELF file for RISC-V"), "{}", err(&s));
    // R_RISCV_RELATIVE's number is another relocation on x86_64.
    let mut s = Synth::x86_64();
    s.relas[0].2 = elf::R_RISCV_RELATIVE;
    assert!(err(&s).contains("has type 3 (R_X86_64_GOT32)"), "{}", err(&s));
    let mut s = Synth::new();
    s.relas[0].2 = elf::R_X86_64_RELATIVE;
    assert!(err(&s).contains("has type 8 (an unsupported relocation)"), "{}", err(&s));
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
    let bytes = pack(Arch::Riscv64, b"compiled".to_vec(), &instances, &apps).unwrap();
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
    let e = format!("{:#}", pack(Arch::Riscv64, vec![], &too_big, &apps).unwrap_err());
    assert!(e.contains("more than its image slot"), "{e}");
    let unknown = [("x".to_string(), "nope".to_string())];
    let e = format!("{:#}", pack(Arch::Riscv64, vec![], &unknown, &apps).unwrap_err());
    assert!(e.contains("app `nope`, which does not exist"), "{e}");
    let mut bad = Synth::new();
    bad.relas.push((0x2010, 0, elf::R_RISCV_64, 0));
    let apps = synthetic_apps(&dir, &[("bad", &bad)]);
    let e = format!(
        "{:#}",
        pack(Arch::Riscv64, vec![], &[("d".into(), "bad".into())], &apps).unwrap_err()
    );
    assert!(e.contains("relocating app `bad` for domain `d`: relocation 2"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pack_takes_the_apps_of_its_architecture() {
    let dir = std::env::temp_dir().join(format!("tessera-pack-x86-{}", std::process::id()));
    let apps = synthetic_apps(&dir, &[("x86", &Synth::x86_64()), ("rv", &Synth::new())]);
    let instances = [("a".to_string(), "x86".to_string()), ("b".to_string(), "x86".to_string())];
    let bytes = pack(Arch::X86_64, b"m".to_vec(), &instances, &apps).unwrap();
    let image = BootImage::parse(&bytes).unwrap();
    for (i, img) in image.images().iter().enumerate() {
        let base = abi::IMAGE_BASE as u64 + i as u64 * abi::IMAGE_SLOT as u64;
        assert_eq!((img.entry, img.segments[0].vaddr), (base + 0x10, base));
        let data = image.segment_data(&img.segments[2]);
        assert_eq!(u64::from_le_bytes(data[8..16].try_into().unwrap()), base + 0x1000);
    }
    let rv = [("d".to_string(), "rv".to_string())];
    let e = format!("{:#}", pack(Arch::X86_64, vec![], &rv, &apps).unwrap_err());
    assert!(e.contains("relocating app `rv` for domain `d`: not an ELF file for x86_64"), "{e}");
    let x86 = [("d".to_string(), "x86".to_string())];
    let e = format!("{:#}", pack(Arch::Riscv64, vec![], &x86, &apps).unwrap_err());
    assert!(e.contains("relocating app `x86` for domain `d`: not an ELF file for RISC-V"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_activation_entry_must_be_even() {
    assert!(check_activation_entry("app", None).is_ok());
    assert!(check_activation_entry("app", Some(0x30b0)).is_ok());
    let e = format!("{:#}", check_activation_entry("faulter", Some(0x30a3)).unwrap_err());
    assert!(e.contains("faulter") && e.contains("0x30a3") && e.contains("activation_set"), "{e}");
    // A synthetic ELF has no symbol table, hence no handler to check.
    assert_eq!(symbol_address(&Synth::x86_64().build(), ACTIVATION_ENTRY).unwrap(), None);
}

#[test]
fn app_names_lists_the_apps() {
    let names = app_names();
    for app in ["counter", "faulty", "hello"] {
        assert!(names.contains(&app.to_string()), "{names:?}");
    }
    assert!(names.is_sorted());
}

/// Builds the real apps for both architectures, checks each with [`check_app`] and prints
/// their segment tables (`cargo test -p system_image -- --ignored --nocapture real_apps`).
#[test]
#[ignore = "builds the apps for RISC-V and x86_64"]
fn real_apps_relocate_at_two_bases() {
    for arch in [Arch::Riscv64, Arch::X86_64] {
        println!("{}:", arch.name());
        let apps = build_apps(arch, Build::Release).unwrap();
        for (name, path) in &apps {
            let bytes = std::fs::read(path).unwrap();
            print!("{}", check_app(arch, name, &bytes).unwrap());
            pack(arch, vec![], &[("d".into(), name.clone())], &apps).unwrap();
        }
    }
}
