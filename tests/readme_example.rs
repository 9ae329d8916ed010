//! The README's layer example is the file `forge/src/nn/example.md`, which
//! `forge::nn`'s documentation includes and compiles as a doc test. This
//! test keeps the README's copy identical to it.

#[test]
fn readme_shows_the_compiled_nn_example() {
    let example = include_str!("../forge/src/nn/example.md");
    let readme = include_str!("../README.md");
    assert!(
        readme.contains(example.trim()),
        "README.md must contain forge/src/nn/example.md verbatim (it is compiled as a doc test)"
    );
}
