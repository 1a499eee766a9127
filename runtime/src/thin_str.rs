//! [`ThinStr`]: an immutable, reference-counted string behind one pointer.
//!
//! Invariants:
//! - One allocation holds a 4-byte count, a 4-byte length and the UTF-8 text; the handle is
//!   8 bytes (8 as an `Option` too), where an `Arc<str>` is 16 and its allocation 8 bytes
//!   longer (it counts weak references as well).
//! - The count is atomic, as in `Arc`; the allocation is freed with the last handle.
//! - Equality, hashing and order are the business of the types built on it: an interned
//!   string ([`crate::lean::Str`]) compares by address, an object key by its text.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering, fence};

/// The start of a string's allocation; the UTF-8 bytes follow it.
#[repr(C)]
struct Header {
    count: AtomicU32,
    len: u32,
}

const HEADER: usize = std::mem::size_of::<Header>();

fn layout(len: usize) -> Layout {
    Layout::from_size_align(HEADER + len, std::mem::align_of::<Header>()).expect("string length fits a Layout")
}

/// A shared, immutable string; see the module's invariants.
pub(crate) struct ThinStr(NonNull<Header>);

// SAFETY: the text is immutable and the count atomic, as in `Arc<str>`.
unsafe impl Send for ThinStr {}
// SAFETY: as above.
unsafe impl Sync for ThinStr {}

impl ThinStr {
    /// A new allocation holding `s`.
    pub(crate) fn new(s: &str) -> Self {
        // Kubernetes objects are at most a few MiB; a 4 GiB string cannot come from one.
        let len = u32::try_from(s.len()).expect("a string of 4 GiB or more");
        let layout = layout(s.len());
        // SAFETY: the layout is never zero-sized (it holds the header); the header and the
        // bytes are written before the pointer is shared.
        unsafe {
            let p = alloc(layout);
            let Some(header) = NonNull::new(p.cast::<Header>()) else { handle_alloc_error(layout) };
            header.as_ptr().write(Header { count: AtomicU32::new(1), len });
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.add(HEADER), s.len());
            ThinStr(header)
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the allocation lives while any handle points to it.
        unsafe { self.0.as_ref() }
    }

    /// The text.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        let len = self.header().len as usize;
        // SAFETY: `len` UTF-8 bytes were copied from a `&str` right after the header.
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>().add(HEADER), len)) }
    }

    /// The address of the allocation: equal for clones of one string only.
    #[inline]
    pub(crate) fn allocation(&self) -> *const u8 {
        self.0.as_ptr().cast::<u8>()
    }

    /// Whether this is the only handle to the allocation.
    pub(crate) fn is_only_reference(&self) -> bool {
        self.header().count.load(Ordering::Acquire) == 1
    }
}

impl Clone for ThinStr {
    fn clone(&self) -> Self {
        let old = self.header().count.fetch_add(1, Ordering::Relaxed);
        if old > i32::MAX as u32 {
            // As `Arc` does on overflow: continuing could free a string still in use.
            std::process::abort();
        }
        ThinStr(self.0)
    }
}

impl Drop for ThinStr {
    fn drop(&mut self) {
        if self.header().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let len = self.header().len as usize;
        // SAFETY: this was the last handle; the allocation was made with this layout.
        unsafe { dealloc(self.0.as_ptr().cast::<u8>(), layout(len)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pointer_to_a_shared_text_freed_with_the_last_handle() {
        assert_eq!(std::mem::size_of::<Option<ThinStr>>(), 8);
        let a = ThinStr::new("default/web-0");
        assert!(a.is_only_reference());
        let b = a.clone();
        assert!(!a.is_only_reference());
        assert_eq!(a.allocation(), b.allocation());
        assert_ne!(a.allocation(), ThinStr::new("default/web-0").allocation());
        drop(a);
        assert!(b.is_only_reference());
        assert_eq!(b.as_str(), "default/web-0");
        assert_eq!(ThinStr::new("").as_str(), "");
        assert_eq!(ThinStr::new("n\u{e9}").as_str(), "n\u{e9}");
        // Handles sent to other threads and dropped there.
        let shared = ThinStr::new("kube-system/dns");
        std::thread::scope(|s| {
            for _ in 0..4 {
                let h = shared.clone();
                s.spawn(move || assert_eq!(h.as_str(), "kube-system/dns"));
            }
        });
        assert!(shared.is_only_reference());
    }
}
