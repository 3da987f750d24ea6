//! Console printing without a heap: text is formatted into a fixed stack buffer that is handed
//! to a sink (the `console_write` system call) whenever it fills, and once at the end.
//!
//! Invariant: the buffer only ever holds whole UTF-8 characters, so every flush is valid text
//! (the kernel refuses anything else).

use core::fmt;

/// Bytes of text collected before one `console_write`.
pub const BUFFER_SIZE: usize = 256;

/// A `fmt::Write` that collects text in a [`BUFFER_SIZE`]-byte buffer and passes it to `sink`
/// in chunks of at most that size, never splitting a character.
pub struct ChunkWriter<F: FnMut(&str)> {
    buf: [u8; BUFFER_SIZE],
    len: usize,
    sink: F,
}

impl<F: FnMut(&str)> ChunkWriter<F> {
    /// An empty buffer that flushes into `sink`.
    pub const fn new(sink: F) -> Self {
        ChunkWriter { buf: [0; BUFFER_SIZE], len: 0, sink }
    }

    /// Passes the buffered text (if any) to the sink and empties the buffer.
    pub fn flush(&mut self) {
        if self.len > 0 {
            // Always UTF-8 by the module's invariant; the fallback never runs.
            let text = core::str::from_utf8(&self.buf[..self.len]).unwrap_or_default();
            (self.sink)(text);
            self.len = 0;
        }
    }
}

impl<F: FnMut(&str)> fmt::Write for ChunkWriter<F> {
    fn write_str(&mut self, mut s: &str) -> fmt::Result {
        while !s.is_empty() {
            let room = BUFFER_SIZE - self.len;
            let n = if s.len() <= room { s.len() } else { s.floor_char_boundary(room) };
            if n == 0 {
                // The next character does not fit in what is left; an empty buffer always has
                // room for one (at most 4 bytes), so this makes progress.
                self.flush();
                continue;
            }
            let (head, tail) = s.split_at(n);
            self.buf[self.len..self.len + n].copy_from_slice(head.as_bytes());
            self.len += n;
            s = tail;
            if self.len == BUFFER_SIZE {
                self.flush();
            }
        }
        Ok(())
    }
}

/// The implementation of [`print!`](crate::print!): formats `args` to the console. Errors of
/// `console_write` are ignored (there is nowhere to report them).
#[cfg(target_os = "none")]
#[doc(hidden)]
pub fn _print(args: fmt::Arguments<'_>) {
    use fmt::Write;
    let mut w = ChunkWriter::new(|text: &str| {
        let _ = crate::console_write(text);
    });
    // `write_str` above never fails; a failing `Display` impl just cuts the text short.
    let _ = w.write_fmt(args);
    w.flush();
}

#[cfg(test)]
mod tests {
    use core::fmt::Write;
    use std::string::String;
    use std::vec::Vec;

    use super::*;

    fn chunks(write: impl Fn(&mut dyn Write)) -> Vec<String> {
        let mut out = Vec::new();
        let mut w = ChunkWriter::new(|s: &str| out.push(String::from(s)));
        write(&mut w);
        w.flush();
        out
    }

    #[test]
    fn short_text_is_one_chunk() {
        assert_eq!(chunks(|w| write!(w, "a{}c", 1).unwrap()), ["a1c"]);
        assert!(chunks(|_| {}).is_empty());
    }

    #[test]
    fn long_text_is_split_at_buffer_size() {
        let text: String = (0..600).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let out = chunks(|w| w.write_str(&text).unwrap());
        assert_eq!(out.iter().map(String::len).collect::<Vec<_>>(), [256, 256, 88]);
        assert_eq!(out.concat(), text);
    }

    #[test]
    fn characters_are_never_split() {
        // 255 ASCII bytes then a 3-byte character: the character goes to the next chunk.
        let text = std::format!("{}€€", "x".repeat(255));
        let out = chunks(|w| w.write_str(&text).unwrap());
        assert_eq!(out.iter().map(String::len).collect::<Vec<_>>(), [255, 6]);
        assert_eq!(out.concat(), text);
        let many = "€".repeat(200);
        let out = chunks(|w| w.write_str(&many).unwrap());
        assert!(out.iter().all(|c| c.len() <= BUFFER_SIZE));
        assert_eq!(out.concat(), many);
    }
}
