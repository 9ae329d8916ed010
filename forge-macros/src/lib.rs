//! Procedural macros for forge.
