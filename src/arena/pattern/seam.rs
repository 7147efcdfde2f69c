//! The arena side of pattern mode.
