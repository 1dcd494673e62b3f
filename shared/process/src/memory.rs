//! How the service processes take memory from the kernel.

/// Turns transparent huge pages off for this process; the first thing each
/// binary's `main` does, before any thread starts.
///
/// mimalloc gives every thread pages of its own and asks the kernel for
/// huge pages (`MADV_HUGEPAGE`) for its regions, so on a node where
/// transparent huge pages are on (`always` or `madvise`, the common
/// defaults) a thread's first allocation can fault in a whole 2 MiB page.
/// The validator starts 64 evaluation threads: on the e2e node its pod was
/// OOMKilled at start at its 128 Mi limit, the kernel's report showing the
/// charge failing in `do_huge_pmd_anonymous_page` from thread
/// `evaluate-43` (docs/operations.md). With small pages a thread costs what
/// it touches. A kernel without the setting (not Linux, or older than 3.15)
/// leaves things as they were, which is no worse than before.
pub fn keep_pages_small() {
    #[cfg(target_os = "linux")]
    {
        // The only failure is a kernel that does not know the setting.
        let _ = rustix::thread::disable_transparent_huge_pages(true);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn huge_pages_are_off_afterwards() {
        super::keep_pages_small();
        assert_eq!(rustix::thread::transparent_huge_pages_are_disabled().ok(), Some(true));
    }
}
