//! The README's examples are files that the library's documentation
//! includes and compiles as doc tests: the layer example
//! `forge/src/nn/example.md` (in `forge::nn`) and the "Coming from
//! PyTorch" loop `forge/src/training_example.md` (in `forge::prelude`).
//! These tests keep the README's copies identical to them; every Rust
//! block of the README is also compiled as it stands (`forge`'s
//! `ReadmeDoctests`, under `cfg(doctest)`).

#[test]
fn readme_shows_the_compiled_nn_example() {
    let example = include_str!("../../forge/src/nn/example.md");
    let readme = include_str!("../../README.md");
    assert!(
        readme.contains(example.trim()),
        "README.md must contain forge/src/nn/example.md verbatim (it is compiled as a doc test)"
    );
}

#[test]
fn readme_shows_the_compiled_training_example() {
    let example = include_str!("../../forge/src/training_example.md");
    let readme = include_str!("../../README.md");
    assert!(
        readme.contains(example.trim()),
        "README.md must contain forge/src/training_example.md verbatim (it is compiled as a doc test)"
    );
}
