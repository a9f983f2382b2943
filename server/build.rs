//! Compiles the one piece of C the server has: `long double` arithmetic for INCRBYFLOAT and
//! HINCRBYFLOAT (see `c/long_double.c`).

fn main() {
    println!("cargo:rerun-if-changed=c/long_double.c");
    cc::Build::new()
        .file("c/long_double.c")
        .warnings(true)
        .compile("latchkey_long_double");
}
