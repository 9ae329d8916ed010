//! trybuild cases for `#[derive(Layer)]`, `Forward` and `sequential!`:
//! `pass/` must compile and run, `fail/` must fail with the committed
//! `.stderr` (regenerate with `TRYBUILD=overwrite cargo test -p forge-ui-tests`,
//! then review the diff).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
    t.compile_fail("fail/*.rs");
}
