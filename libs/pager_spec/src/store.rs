//! Where a paged stretch's pages go below its caches: the backing store ([`Store`]: the local
//! disk, or other nodes' memory through the remote paging client, mirrored to another server
//! or to the local disk), and the thesis's ten hierarchies ([`Combination`], Heracles Fig 8.2)
//! as a [`Hierarchy`] (the cache part) beside a [`Backing`] (the store part).

use alloc::vec::Vec;

pub use net_interface::frame::Endpoint;

use crate::Hierarchy;

/// Where a remote store's pages are mirrored (`mirror=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mirror {
    /// Not mirrored: a page held remotely has one copy, on one server.
    #[default]
    None,
    /// To a second server, by the remote paging client: the backing store manager routes as
    /// for an unmirrored remote store.
    Server,
    /// To the local disk, by the backing store manager: every page written remotely is written
    /// to the disk too.
    Disk,
}

impl Mirror {
    /// Its name, as a pager spec spells it.
    pub fn name(self) -> &'static str {
        match self {
            Mirror::None => "none",
            Mirror::Server => "server",
            Mirror::Disk => "disk",
        }
    }
}

/// The backing store's mode, as the backing store manager routes by it (the thesis's
/// `local_only`, `remote_only`, `remote_mirror`, `local_mirror`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backing {
    /// The local disk only.
    #[default]
    Local,
    /// Remote memory, mirrored as said.
    Remote {
        /// The mirror.
        mirror: Mirror,
    },
}

impl Backing {
    /// Whether pages go to a remote store.
    pub fn is_remote(self) -> bool {
        matches!(self, Backing::Remote { .. })
    }

    /// The mirror (none for the local disk).
    pub fn mirror(self) -> Mirror {
        match self {
            Backing::Local => Mirror::None,
            Backing::Remote { mirror } => mirror,
        }
    }
}

/// How to reach remote memory (`net=`, `traders=`, `servers=`, `spread=`), for the remote
/// paging client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSpec {
    /// The mirror.
    pub mirror: Mirror,
    /// The domain's network session's channel prefix (`NAME-req`, `NAME-resp`).
    pub net: alloc::string::String,
    /// The traders asked for servers, in order (0 to [`MAX_TRADERS`]; at least one of these
    /// or of `servers`).
    pub traders: Vec<Endpoint>,
    /// Servers tried before asking a trader (0 to [`MAX_SERVERS`]).
    pub servers: Vec<Endpoint>,
    /// Whether pages are spread over several servers (else one server's reservation grows).
    pub spread: bool,
    /// Whether the client compresses pages before sending them (`netc=`, the thesis's
    /// `netc`); ignored under a compressed cache, whose pages go compressed anyway.
    pub netc: bool,
}

/// The backing store of a paged stretch (`store=`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Store {
    /// The local disk.
    #[default]
    Local,
    /// Remote memory, with the local disk as fallback (and mirror, if asked).
    Remote(RemoteSpec),
}

impl Store {
    /// The mode the backing store manager routes by.
    pub fn backing(&self) -> Backing {
        match self {
            Store::Local => Backing::Local,
            Store::Remote(r) => Backing::Remote { mirror: r.mirror },
        }
    }

    /// The remote part, if the store is remote.
    pub fn remote(&self) -> Option<&RemoteSpec> {
        match self {
            Store::Local => None,
            Store::Remote(r) => Some(r),
        }
    }
}

/// The most traders a spec may name (the thesis's well-known traders).
pub const MAX_TRADERS: usize = 3;
/// The most static servers a spec may name.
pub const MAX_SERVERS: usize = 4;

/// One of the thesis's ten hierarchy combinations (Heracles Fig 8.2), in its order: a
/// [`Hierarchy`]'s name and a [`Backing`] choose exactly one ([`Combination::of`]), and each
/// is spelled in a spec as [`Combination::keys`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combination {
    /// 1. Local Paging.
    LocalPaging,
    /// 2. Local Paging with a Compressed Cache.
    LocalCompressed,
    /// 3. Local Paging with a Prefetching Compressed Cache.
    LocalPrefetchingCompressed,
    /// 4. Local Paging with a Prefetching Non-Compressed Cache.
    LocalPrefetching,
    /// 5. Remote Paging.
    Remote,
    /// 6. Remote Paging with a Compressed Cache.
    RemoteCompressed,
    /// 7. Remote Paging, Mirroring to Another Server.
    RemoteMirrorServer,
    /// 8. Remote Paging, Mirroring to Local Disk.
    RemoteMirrorDisk,
    /// 9. Remote Paging, Mirroring to Another Server with a Compressed Cache.
    RemoteMirrorServerCompressed,
    /// 10. Remote Paging, Mirroring to Local Disk with a Compressed Cache.
    RemoteMirrorDiskCompressed,
}

impl Combination {
    /// All ten, in the figure's order.
    pub const ALL: [Combination; 10] = [
        Combination::LocalPaging,
        Combination::LocalCompressed,
        Combination::LocalPrefetchingCompressed,
        Combination::LocalPrefetching,
        Combination::Remote,
        Combination::RemoteCompressed,
        Combination::RemoteMirrorServer,
        Combination::RemoteMirrorDisk,
        Combination::RemoteMirrorServerCompressed,
        Combination::RemoteMirrorDiskCompressed,
    ];

    /// Its number in the figure, 1 to 10.
    pub fn number(self) -> usize {
        Combination::ALL.iter().position(|&c| c == self).unwrap_or(0) + 1
    }

    /// The thesis's name for it.
    pub fn title(self) -> &'static str {
        match self {
            Combination::LocalPaging => "Local Paging",
            Combination::LocalCompressed => "Local Paging with a Compressed Cache",
            Combination::LocalPrefetchingCompressed => {
                "Local Paging with a Prefetching Compressed Cache"
            }
            Combination::LocalPrefetching => "Local Paging with a Prefetching Non-Compressed Cache",
            Combination::Remote => "Remote Paging",
            Combination::RemoteCompressed => "Remote Paging with a Compressed Cache",
            Combination::RemoteMirrorServer => "Remote Paging, Mirroring to Another Server",
            Combination::RemoteMirrorDisk => "Remote Paging, Mirroring to Local Disk",
            Combination::RemoteMirrorServerCompressed => {
                "Remote Paging, Mirroring to Another Server with a Compressed Cache"
            }
            Combination::RemoteMirrorDiskCompressed => {
                "Remote Paging, Mirroring to Local Disk with a Compressed Cache"
            }
        }
    }

    /// The spec's `hierarchy` (as [`Hierarchy::name`] spells it) and its backing store.
    pub fn parts(self) -> (&'static str, Backing) {
        let remote = |mirror| Backing::Remote { mirror };
        match self {
            Combination::LocalPaging => ("local", Backing::Local),
            Combination::LocalCompressed => ("compressed", Backing::Local),
            Combination::LocalPrefetchingCompressed => ("prefetching-compressed", Backing::Local),
            Combination::LocalPrefetching => ("prefetching", Backing::Local),
            Combination::Remote => ("local", remote(Mirror::None)),
            Combination::RemoteCompressed => ("compressed", remote(Mirror::None)),
            Combination::RemoteMirrorServer => ("local", remote(Mirror::Server)),
            Combination::RemoteMirrorDisk => ("local", remote(Mirror::Disk)),
            Combination::RemoteMirrorServerCompressed => ("compressed", remote(Mirror::Server)),
            Combination::RemoteMirrorDiskCompressed => ("compressed", remote(Mirror::Disk)),
        }
    }

    /// The spec's keys that choose it: `hierarchy=...` and, for a remote one,
    /// `store=remote` and `mirror=...` (`mirror=none` is the default and left out).
    pub fn keys(self) -> alloc::string::String {
        let (hierarchy, backing) = self.parts();
        match backing {
            Backing::Local => alloc::format!("hierarchy={hierarchy}"),
            Backing::Remote { mirror: Mirror::None } => {
                alloc::format!("hierarchy={hierarchy},store=remote")
            }
            Backing::Remote { mirror } => {
                alloc::format!("hierarchy={hierarchy},store=remote,mirror={}", mirror.name())
            }
        }
    }

    /// The combination a hierarchy over a backing store is, if it is one of the ten (the
    /// prefetching hierarchies page only to the local disk).
    pub fn of(hierarchy: &Hierarchy, backing: Backing) -> Option<Combination> {
        let name = hierarchy.name();
        Combination::ALL.into_iter().find(|c| c.parts() == (name, backing))
    }
}
