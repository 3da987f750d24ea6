//! The semantic rules of a manifest, shared by the host tool and the kernel.

use alloc::string::String;
use core::fmt;

use crate::{
    Bytes, KERNEL_RESERVE, MAX_ARG_LEN, MAX_ARGS, MAX_DOMAINS, MAX_NAME_LEN, MEMORY_ALIGN,
    MIN_MEMORY, Manifest, PAGE_SIZE,
};

/// A rule of [`Manifest::check`] that a manifest breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Problem {
    /// The domain at fault, or `None` for the system as a whole.
    pub domain: Option<DomainRef>,
    /// What is wrong.
    pub kind: ProblemKind,
}

/// Which domain a [`Problem`] is about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DomainRef {
    /// Its position in [`Manifest::domains`] (0-based).
    pub index: usize,
    /// Its name as written (possibly the invalid name the problem is about).
    pub name: String,
}

/// What is wrong, for [`Problem`]. Its `Display` is the reason without naming the domain.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ProblemKind {
    /// The manifest declares no domain.
    NoDomains,
    /// More than [`MAX_DOMAINS`] domains.
    TooManyDomains {
        /// How many the manifest declares.
        count: usize,
    },
    /// System memory is not a multiple of [`MEMORY_ALIGN`].
    MemoryUnaligned {
        /// System memory in bytes.
        memory: u64,
    },
    /// System memory is below [`MIN_MEMORY`].
    MemoryTooSmall {
        /// System memory in bytes.
        memory: u64,
    },
    /// The guarantees of the domains up to and including this one, plus [`KERNEL_RESERVE`],
    /// exceed system memory.
    OverCapacity {
        /// The sum of the guarantees up to and including this domain, in bytes (saturating).
        guaranteed: u64,
        /// System memory in bytes.
        memory: u64,
    },
    /// The domain's name is empty.
    NameEmpty,
    /// The domain's name is longer than [`MAX_NAME_LEN`] bytes.
    NameTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The domain's name has a character outside `[a-z0-9-]`.
    NameBadChar {
        /// The first such character.
        ch: char,
    },
    /// Another domain before this one has the same name.
    DuplicateName {
        /// The index of the first domain with this name.
        first: usize,
    },
    /// The app name is empty.
    AppEmpty,
    /// The app name is longer than [`MAX_NAME_LEN`] bytes.
    AppTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The app name has a character outside `[a-z0-9-]`.
    AppBadChar {
        /// The first such character.
        ch: char,
    },
    /// More than [`MAX_ARGS`] arguments.
    TooManyArgs {
        /// How many the domain has.
        count: usize,
    },
    /// An argument longer than [`MAX_ARG_LEN`] bytes.
    ArgTooLong {
        /// Which argument (0-based).
        arg: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// `guaranteed` is zero.
    GuaranteedZero,
    /// `guaranteed` is not a multiple of [`PAGE_SIZE`].
    GuaranteedUnaligned {
        /// The value in bytes.
        bytes: u64,
    },
    /// `optimistic` is not a multiple of [`PAGE_SIZE`].
    OptimisticUnaligned {
        /// The value in bytes.
        bytes: u64,
    },
}

/// The part of a manifest a [`ProblemKind`] is about (for the front end's key paths).
#[cfg_attr(not(feature = "toml"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// The list of domains as a whole.
    Domains,
    /// `system.memory`.
    SystemMemory,
    /// `domain[i].name`.
    Name,
    /// `domain[i].app`.
    App,
    /// `domain[i].args`.
    Args,
    /// `domain[i].args[j]`.
    Arg(usize),
    /// `domain[i].memory.guaranteed`.
    Guaranteed,
    /// `domain[i].memory.optimistic`.
    Optimistic,
}

impl ProblemKind {
    /// The part of the manifest at fault.
    #[cfg_attr(not(feature = "toml"), allow(dead_code))]
    pub(crate) fn field(&self) -> Field {
        match self {
            Self::NoDomains | Self::TooManyDomains { .. } => Field::Domains,
            Self::MemoryUnaligned { .. } | Self::MemoryTooSmall { .. } => Field::SystemMemory,
            Self::NameEmpty
            | Self::NameTooLong { .. }
            | Self::NameBadChar { .. }
            | Self::DuplicateName { .. } => Field::Name,
            Self::AppEmpty | Self::AppTooLong { .. } | Self::AppBadChar { .. } => Field::App,
            Self::TooManyArgs { .. } => Field::Args,
            Self::ArgTooLong { arg, .. } => Field::Arg(*arg),
            Self::OverCapacity { .. } | Self::GuaranteedZero | Self::GuaranteedUnaligned { .. } => {
                Field::Guaranteed
            }
            Self::OptimisticUnaligned { .. } => Field::Optimistic,
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDomains => write!(f, "no domains: a manifest needs at least one [[domain]]"),
            Self::TooManyDomains { count } => {
                write!(f, "too many domains: {count} (at most {MAX_DOMAINS})")
            }
            Self::MemoryUnaligned { memory } => write!(
                f,
                "system memory {} is not a multiple of {}",
                Bytes(*memory),
                Bytes(MEMORY_ALIGN)
            ),
            Self::MemoryTooSmall { memory } => write!(
                f,
                "system memory {} is below the minimum of {}",
                Bytes(*memory),
                Bytes(MIN_MEMORY)
            ),
            Self::OverCapacity { guaranteed, memory } => write!(
                f,
                "memory over capacity: the guarantees up to this domain total {}, plus the \
                 kernel reserve of {}, exceed the system memory of {}",
                Bytes(*guaranteed),
                Bytes(KERNEL_RESERVE),
                Bytes(*memory)
            ),
            Self::NameEmpty => write!(f, "empty domain name"),
            Self::NameTooLong { len } => {
                write!(f, "domain name is {len} bytes long (at most {MAX_NAME_LEN})")
            }
            Self::NameBadChar { ch } => {
                write!(f, "domain name contains {ch:?} (use only a-z, 0-9 and '-')")
            }
            Self::DuplicateName { first } => {
                write!(f, "duplicate domain name (first used by domain {first})")
            }
            Self::AppEmpty => write!(f, "empty app name"),
            Self::AppTooLong { len } => {
                write!(f, "app name is {len} bytes long (at most {MAX_NAME_LEN})")
            }
            Self::AppBadChar { ch } => {
                write!(f, "app name contains {ch:?} (use only a-z, 0-9 and '-')")
            }
            Self::TooManyArgs { count } => {
                write!(f, "too many args: {count} (at most {MAX_ARGS})")
            }
            Self::ArgTooLong { arg, len } => {
                write!(f, "arg {arg} is {len} bytes long (at most {MAX_ARG_LEN})")
            }
            Self::GuaranteedZero => write!(
                f,
                "guaranteed memory is 0 (a domain needs at least one page, {})",
                Bytes(PAGE_SIZE)
            ),
            Self::GuaranteedUnaligned { bytes } => write!(
                f,
                "guaranteed memory {} is not a multiple of the page size ({})",
                Bytes(*bytes),
                Bytes(PAGE_SIZE)
            ),
            Self::OptimisticUnaligned { bytes } => write!(
                f,
                "optimistic memory {} is not a multiple of the page size ({})",
                Bytes(*bytes),
                Bytes(PAGE_SIZE)
            ),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.domain {
            Some(d) => write!(f, "domain {} ({:?}): {}", d.index, d.name, self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Problem {}

/// The first character of `s` outside `[a-z0-9-]`, if any.
fn bad_char(s: &str) -> Option<char> {
    s.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '-'))
}

impl Manifest {
    /// Checks the semantic rules (see the [crate documentation](crate)); returns the first
    /// problem found, in manifest order (system, then each domain in turn, then capacity).
    pub fn check(&self) -> Result<(), Problem> {
        let system = |kind| Problem { domain: None, kind };
        if self.domains.is_empty() {
            return Err(system(ProblemKind::NoDomains));
        }
        if self.domains.len() > MAX_DOMAINS {
            let kind = ProblemKind::TooManyDomains { count: self.domains.len() };
            let d = &self.domains[MAX_DOMAINS];
            return Err(Problem {
                domain: Some(DomainRef { index: MAX_DOMAINS, name: d.name.clone() }),
                kind,
            });
        }
        if !self.memory.is_multiple_of(MEMORY_ALIGN) {
            return Err(system(ProblemKind::MemoryUnaligned { memory: self.memory }));
        }
        if self.memory < MIN_MEMORY {
            return Err(system(ProblemKind::MemoryTooSmall { memory: self.memory }));
        }
        for (index, d) in self.domains.iter().enumerate() {
            let problem =
                |kind| Problem { domain: Some(DomainRef { index, name: d.name.clone() }), kind };
            if d.name.is_empty() {
                return Err(problem(ProblemKind::NameEmpty));
            }
            if d.name.len() > MAX_NAME_LEN {
                return Err(problem(ProblemKind::NameTooLong { len: d.name.len() }));
            }
            if let Some(ch) = bad_char(&d.name) {
                return Err(problem(ProblemKind::NameBadChar { ch }));
            }
            if let Some(first) = self.domains[..index].iter().position(|e| e.name == d.name) {
                return Err(problem(ProblemKind::DuplicateName { first }));
            }
            if d.app.is_empty() {
                return Err(problem(ProblemKind::AppEmpty));
            }
            if d.app.len() > MAX_NAME_LEN {
                return Err(problem(ProblemKind::AppTooLong { len: d.app.len() }));
            }
            if let Some(ch) = bad_char(&d.app) {
                return Err(problem(ProblemKind::AppBadChar { ch }));
            }
            if d.args.len() > MAX_ARGS {
                return Err(problem(ProblemKind::TooManyArgs { count: d.args.len() }));
            }
            if let Some((arg, a)) = d.args.iter().enumerate().find(|(_, a)| a.len() > MAX_ARG_LEN) {
                return Err(problem(ProblemKind::ArgTooLong { arg, len: a.len() }));
            }
            if d.guaranteed == 0 {
                return Err(problem(ProblemKind::GuaranteedZero));
            }
            if !d.guaranteed.is_multiple_of(PAGE_SIZE) {
                return Err(problem(ProblemKind::GuaranteedUnaligned { bytes: d.guaranteed }));
            }
            if !d.optimistic.is_multiple_of(PAGE_SIZE) {
                return Err(problem(ProblemKind::OptimisticUnaligned { bytes: d.optimistic }));
            }
        }
        let mut guaranteed = 0u64;
        for (index, d) in self.domains.iter().enumerate() {
            guaranteed = guaranteed.saturating_add(d.guaranteed);
            if guaranteed.saturating_add(KERNEL_RESERVE) > self.memory {
                return Err(Problem {
                    domain: Some(DomainRef { index, name: d.name.clone() }),
                    kind: ProblemKind::OverCapacity { guaranteed, memory: self.memory },
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DomainSpec, MIB};
    use alloc::string::ToString;
    use alloc::vec;
    use alloc::vec::Vec;

    fn domain(name: &str) -> DomainSpec {
        DomainSpec {
            name: name.to_string(),
            app: "hello".to_string(),
            args: Vec::new(),
            guaranteed: 256 * 1024,
            optimistic: 0,
        }
    }

    fn manifest() -> Manifest {
        Manifest { memory: 128 * MIB, domains: vec![domain("a"), domain("b")] }
    }

    fn kind(m: &Manifest) -> ProblemKind {
        m.check().unwrap_err().kind
    }

    #[test]
    fn valid_manifest_passes() {
        manifest().check().unwrap();
    }

    #[test]
    fn domain_count_limits() {
        let mut m = manifest();
        m.domains.clear();
        assert_eq!(kind(&m), ProblemKind::NoDomains);
        m.domains = (0..MAX_DOMAINS).map(|i| domain(&i.to_string())).collect();
        m.domains.iter_mut().for_each(|d| d.guaranteed = PAGE_SIZE);
        m.check().unwrap();
        m.domains.push(domain("extra"));
        assert_eq!(kind(&m), ProblemKind::TooManyDomains { count: MAX_DOMAINS + 1 });
    }

    #[test]
    fn system_memory_rules() {
        let mut m = manifest();
        m.memory = 128 * MIB + 4096;
        assert_eq!(kind(&m), ProblemKind::MemoryUnaligned { memory: 128 * MIB + 4096 });
        m.memory = 15 * MIB;
        assert_eq!(kind(&m), ProblemKind::MemoryTooSmall { memory: 15 * MIB });
        m.memory = MIN_MEMORY;
        m.check().unwrap();
    }

    #[test]
    fn name_rules() {
        let mut m = manifest();
        m.domains[1].name = String::new();
        assert_eq!(kind(&m), ProblemKind::NameEmpty);
        m.domains[1].name = "x".repeat(MAX_NAME_LEN);
        m.check().unwrap();
        m.domains[1].name = "x".repeat(MAX_NAME_LEN + 1);
        assert_eq!(kind(&m), ProblemKind::NameTooLong { len: MAX_NAME_LEN + 1 });
        m.domains[1].name = "Hello".to_string();
        assert_eq!(kind(&m), ProblemKind::NameBadChar { ch: 'H' });
        m.domains[1].name = "a_b".to_string();
        assert_eq!(kind(&m), ProblemKind::NameBadChar { ch: '_' });
        m.domains[1].name = "a".to_string();
        let p = m.check().unwrap_err();
        assert_eq!(p.kind, ProblemKind::DuplicateName { first: 0 });
        assert_eq!(p.domain, Some(DomainRef { index: 1, name: "a".to_string() }));
        assert_eq!(
            p.to_string(),
            "domain 1 (\"a\"): duplicate domain name (first used by domain 0)"
        );
    }

    #[test]
    fn app_and_args_rules() {
        let mut m = manifest();
        m.domains[0].app = String::new();
        assert_eq!(kind(&m), ProblemKind::AppEmpty);
        m.domains[0].app = "a/b".to_string();
        assert_eq!(kind(&m), ProblemKind::AppBadChar { ch: '/' });
        m.domains[0].app = "y".repeat(MAX_NAME_LEN + 1);
        assert_eq!(kind(&m), ProblemKind::AppTooLong { len: MAX_NAME_LEN + 1 });
        m.domains[0].app = "hello".to_string();
        m.domains[0].args = vec!["z".to_string(); MAX_ARGS];
        m.check().unwrap();
        m.domains[0].args.push("z".to_string());
        assert_eq!(kind(&m), ProblemKind::TooManyArgs { count: MAX_ARGS + 1 });
        m.domains[0].args = vec![String::new(), "q".repeat(MAX_ARG_LEN + 1)];
        assert_eq!(kind(&m), ProblemKind::ArgTooLong { arg: 1, len: MAX_ARG_LEN + 1 });
    }

    #[test]
    fn memory_contract_rules() {
        let mut m = manifest();
        m.domains[0].guaranteed = 0;
        assert_eq!(kind(&m), ProblemKind::GuaranteedZero);
        m.domains[0].guaranteed = 1000;
        assert_eq!(kind(&m), ProblemKind::GuaranteedUnaligned { bytes: 1000 });
        m.domains[0].guaranteed = 4096;
        m.domains[0].optimistic = 100;
        assert_eq!(kind(&m), ProblemKind::OptimisticUnaligned { bytes: 100 });
        m.domains[0].optimistic = 1 << 40;
        m.check().unwrap();
    }

    #[test]
    fn capacity_is_exact() {
        let mut m = manifest();
        m.memory = 16 * MIB;
        m.domains[0].guaranteed = 4 * MIB;
        m.domains[1].guaranteed = 4 * MIB;
        m.check().unwrap();
        m.domains[1].guaranteed += PAGE_SIZE;
        let p = m.check().unwrap_err();
        assert_eq!(
            p.kind,
            ProblemKind::OverCapacity { guaranteed: 8 * MIB + 4096, memory: 16 * MIB }
        );
        assert_eq!(p.domain.unwrap().index, 1);
        // Sums saturate rather than wrap.
        m.domains[0].guaranteed = u64::MAX - 4095;
        assert!(matches!(kind(&m), ProblemKind::OverCapacity { .. }));
    }
}
