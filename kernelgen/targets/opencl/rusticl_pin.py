"""The pinned build of Mesa's rusticl (its OpenCL driver) whose freedreno (Adreno ir3) and panfrost (Mali Valhall)
backends judge the opencl target's kernels without the GPUs (issue 47), and where `make mesa-compilers`
(tools/rusticl_build.py) puts it.

The Mesa source is the one the Vulkan compilers are built from (vulkan/mesa_pin.py), so both targets' kernels
are judged by the same ir3 and Valhall compilers. Rusticl's Rust code needs bindgen >= 0.65 (bookworm has
0.60): Debian trixie's bindgen 0.71.1 and the crates it needs are pinned here by their pool file and sha256, so
a build downloads those .debs and nothing else (no Packages index), and cargo builds bindgen offline from them.
"""
from __future__ import annotations

from pathlib import Path

from ..vulkan.mesa_pin import DEBIAN_VERSION, cache_root

POOL_URL = "http://deb.debian.org/debian/pool/main/r/"
# (path under POOL_URL, sha256) of each trixie librust-*-dev package bindgen-cli 0.71.1 needs
CRATES = (
    ("rust-aho-corasick/librust-aho-corasick-dev_1.1.3-1_amd64.deb",
     "d1277c6e5f8b8266ec85163b0fcc0314e23a2f41e61acef9e1a5ddf228bdad44"),
    ("rust-annotate-snippets/librust-annotate-snippets-dev_0.11.4-1_amd64.deb",
     "f8ce820e12fcd4ee483ca624fba85bc5f3953507d46144fadcabe78235cc5260"),
    ("rust-anstream/librust-anstream-dev_0.6.15-1_amd64.deb",
     "48b860adcfef87a10d0324eba7e47d8d3c041e3e7c14836858efbdab2f28cf2c"),
    ("rust-anstyle/librust-anstyle-dev_1.0.8-1_amd64.deb",
     "5d557e7101f4c62a66572b10ab259a127a72ae972f2be50fa36584cc3292a973"),
    ("rust-anstyle-parse/librust-anstyle-parse-dev_0.2.1-1+b2_amd64.deb",
     "693b8ad57341b3e598e60094f02ef15780e1e2e75a67da963bf1d0a53c676f5c"),
    ("rust-anstyle-query/librust-anstyle-query-dev_1.0.0-1+b2_amd64.deb",
     "951abcaea4ab07b471816c100589df4229f4a487cd9be3cc014ce5ca38fb6ea1"),
    ("rust-bindgen/librust-bindgen-dev_0.71.1-4_amd64.deb",
     "881bb48ecba9b0296815d6a28aede0e6d2f13b48daff5548ef8551fda90f2b98"),
    ("rust-bitflags/librust-bitflags-dev_2.8.0-1_amd64.deb",
     "17e80c4df904141bab83edfff2150b853f35f921236ca428722305683d72d971"),
    ("rust-cexpr/librust-cexpr-dev_0.6.0-2+b2_amd64.deb",
     "c7ad02315d32986fe560897e8c3c535b072be6e52f04d12ea2f3324ab76f78fd"),
    ("rust-cfg-if/librust-cfg-if-dev_1.0.0-1+b2_amd64.deb",
     "11e7fb67741e2edd0e72df2b279e90f3260bb20f0ed1def2ad4bbcf59d2d5cd9"),
    ("rust-clang-sys/librust-clang-sys-dev_1.8.1-3_amd64.deb",
     "920bb66f316b5787c60af0ec855aa6a801c0cc61f4414238fa2d82eede0788ff"),
    ("rust-clap-builder/librust-clap-builder-dev_4.5.23-1_amd64.deb",
     "654be64f5ee748ed5519975256e793b27d2d5ca2381f0ecc0516621bbf8f2128"),
    ("rust-clap-complete/librust-clap-complete-dev_4.5.40-1_amd64.deb",
     "77a39aa3a3f89453beff562f088cc6042454d30c1f18925723335f9d4d9680c4"),
    ("rust-clap-derive/librust-clap-derive-dev_4.5.18-1_amd64.deb",
     "8583fad67107d612213f626fd0b47397ddf3e3bba322e2eb6e0715d0a9fa0902"),
    ("rust-clap/librust-clap-dev_4.5.23-1_amd64.deb",
     "f5286536a5d350b387548e7be32d28da82a32bdd5c612b6f66a266200275ab06"),
    ("rust-clap-lex/librust-clap-lex-dev_0.7.4-1_amd64.deb",
     "4c9ea85d17272ecfb9c58ec95f08f7f86f2fd150af1a65c379d858e1e80d074d"),
    ("rust-colorchoice/librust-colorchoice-dev_1.0.0-1+b3_amd64.deb",
     "434a6e7663c11ead8429414890a9e22b38c420eab5d79074dfe4858f63b212c7"),
    ("rust-either/librust-either-dev_1.13.0-1_amd64.deb",
     "15b20c018b6074c7d8581b470f6ae3f0fa9ab9c2c38da9aaa9337b7fe838548d"),
    ("rust-env-filter/librust-env-filter-dev_0.1.3-1_amd64.deb",
     "5152caed8d218cd49db748a59ab6e13daa02d89123e1750c4eb3aaebd19168ca"),
    ("rust-env-logger/librust-env-logger-dev_0.11.6-1_amd64.deb",
     "6e5185004b2ea9c3b4c2f7a60e8d8124cd6349a7d972cb5d05f09818e06d5cc5"),
    ("rust-glob/librust-glob-dev_0.3.2-1_amd64.deb",
     "ae1c0cfb49640886faa0219c9614fcea419c9e34abda8946c97fffc8858e2a88"),
    ("rust-heck/librust-heck-dev_0.4.1-1+b2_amd64.deb",
     "612bbb9eaf0b1b7de51b3accfdca2922c1834ff06e2746bea7dd3b13faba488c"),
    ("rust-humantime/librust-humantime-dev_2.1.0-2_amd64.deb",
     "2b312c059c05e8a7cb668568a6a591f80fadce102c2c1f390eb5aae2883c300a"),
    ("rust-itertools/librust-itertools-dev_0.13.0-3_amd64.deb",
     "a1542a7eea8dc6092bf05669ce2b44184e7313e0fde145cafbf7ac1f5dbff6f2"),
    ("rust-libc/librust-libc-dev_0.2.169-1_amd64.deb",
     "00769b8df5eba68c45a86523b679dccbd9046123b551288133a72220f831f4d0"),
    ("rust-libloading/librust-libloading-dev_0.8.5-1_amd64.deb",
     "bf9274c73016102946dc3179a4d0e97e3ecf37cc9ce3f46927fd49b5b80ac137"),
    ("rust-log/librust-log-dev_0.4.26-1_amd64.deb",
     "451d3adfa4243e8b1784e4e7726b56fa466d95a0f4ac6ce27840ac4012af727c"),
    ("rust-memchr/librust-memchr-dev_2.7.4-1_amd64.deb",
     "ac11a7479b256ec5a396c9efe8c8d1c7273b880b68e72b8ddd73618741f1a7fd"),
    ("rust-minimal-lexical/librust-minimal-lexical-dev_0.2.1-2+b2_amd64.deb",
     "bd3ffded4418452cedb727a3a451e4b70b6948129eb67947947740f8ecd7507c"),
    ("rust-nom/librust-nom-dev_7.1.3-1+b2_amd64.deb",
     "0303ddc0411a6a4e0db5a20beaa46a2544b0cb074501437594a1efe22ad923a6"),
    ("rust-prettyplease/librust-prettyplease-dev_0.2.6-1+b3_amd64.deb",
     "a49ac23918d9435bb27b9611cec4100233a8d3fa032d1d68d78fc989f1c80f99"),
    ("rust-proc-macro2/librust-proc-macro2-dev_1.0.92-1+b1_amd64.deb",
     "c7c7dd7cdc8f16934fbcfd4d9f4de7d65aa457cdcc0e7fe59ecc8a56c665b502"),
    ("rust-quote/librust-quote-dev_1.0.40-1_amd64.deb",
     "ce439fa5fb54fdd2d1f614737b1de55d159de5b8b8878c17aa86d90e881d4f1f"),
    ("rust-regex-automata/librust-regex-automata-dev_0.4.9-2_amd64.deb",
     "e5a344ed160b27d92337b0dd300a33cd66b000fac1264f93d96ababa7091f459"),
    ("rust-regex/librust-regex-dev_1.11.1-2_amd64.deb",
     "628a25f7400d081681b712ac1a6522d1ff0de1f0f615c9c33a24eec5782b0066"),
    ("rust-regex-syntax/librust-regex-syntax-dev_0.8.5-1_amd64.deb",
     "0454062c459cc9213350095cbf29aa2e12f06c5f0f09e699df5fd8ca28073b8f"),
    ("rust-rustc-hash/librust-rustc-hash-dev_1.1.0-1+b2_amd64.deb",
     "59006e6cbdc4b757f136e10e3338a7f45cf8b8b9bdbfefdc9bc9487df831ec89"),
    ("rust-shlex/librust-shlex-dev_1.3.0-1_amd64.deb",
     "757dcf41be3b0b798a73241c96eae34a709b6b110228d3542ce70db88ed1638c"),
    ("rust-strsim-0.10/librust-strsim-0.10-dev_0.10.0-4_amd64.deb",
     "a6c74b5500ab8d8a23f9b7886f07f11325f6e85784576fcd787ef115bf422b57"),
    ("rust-syn/librust-syn-dev_2.0.98-1_amd64.deb",
     "ef704aecf33a713f92dfef724fc10d747649ae6e7a90c31afe54aa2a1a3db71e"),
    ("rust-unicode-ident/librust-unicode-ident-dev_1.0.13-1_amd64.deb",
     "afb26e7dfc91de355a433683493f361a2a415a3ca5831efa2fea35d42c0c1e43"),
    ("rust-unicode-width-0.1/librust-unicode-width-0.1-dev_0.1.14-2+b2_amd64.deb",
     "46668881a2ee79022d158d997ae5e1e56bd52d728fc1f87356ec69249504aa29"),
    ("rust-utf8parse/librust-utf8parse-dev_0.2.1-1+b2_amd64.deb",
     "54b4cfab5b02ea32d4b1f80b61c01921b08c5ea8639c77ec34ab4b00fa686058"),
)
LIBRARY = "src/gallium/targets/rusticl/libRusticlOpenCL.so.1.0.0"  # inside the meson build folder
INSTALL_COMMAND = "make mesa-compilers"


def install_dir() -> Path:
    return cache_root() / f"rusticl-{DEBIAN_VERSION}"


def installed_library() -> Path:
    return install_dir() / "lib" / "libRusticlOpenCL.so.1"


def icd_dir() -> Path:
    """A vendors folder (OCL_ICD_VENDORS) holding only rusticl's .icd file, which names installed_library()."""
    return install_dir() / "icd"


def stamp_path() -> Path:
    """Written last by the build: its presence means the library is in place."""
    return install_dir() / "installed"


def is_installed() -> bool:
    return stamp_path().is_file() and installed_library().is_file()
