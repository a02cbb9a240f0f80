//! Kestrel facade (filled below).
