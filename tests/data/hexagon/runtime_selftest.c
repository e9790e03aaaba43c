/* runtime_selftest.c: exercises kg_runtime's printers, libc replacements, file errors,
 * argument passing and exit status, for tests/test_hexagon_harness.py.
 *
 * Usage: runtime_selftest <file of 3 bytes> [more args...]; exits with status 7.
 */
#include "kg_runtime.h"

static void show_i64(int64_t v)
{
    kg_put_i64(KG_STDOUT, v);
    kg_puts("");
}

static void check(int ok, const char *what)
{
    kg_fputs(KG_STDOUT, what);
    kg_puts(ok ? " ok" : " FAILED");
}

int main(int argc, char **argv)
{
    kg_fputs(KG_STDOUT, "argc=");
    show_i64(argc);
    for (int i = 1; i < argc; i++) {
        kg_puts(argv[i]);
    }

    show_i64(0);
    show_i64(-1);
    show_i64(INT64_MIN);
    show_i64(INT64_MAX);
    kg_put_u64(KG_STDOUT, UINT64_MAX);
    kg_puts("");
    kg_put_hex32(KG_STDOUT, 0xdeadbeefu);
    kg_puts("");

    /* Sizes depend on argc so clang cannot inline the calls into fixed stores. */
    size_t n = (size_t)argc + 13u;
    unsigned char buf[64];
    for (size_t i = 0; i < sizeof buf; i++) {
        buf[i] = (unsigned char)i;
    }
    memmove(buf + 1, buf, n); /* overlapping, destination above source */
    int ok = buf[0] == 0;
    for (size_t i = 1; i <= n; i++) {
        ok &= buf[i] == i - 1;
    }
    memmove(buf, buf + 1, n); /* overlapping, destination below source */
    for (size_t i = 0; i < n; i++) {
        ok &= buf[i] == i;
    }
    check(ok, "memmove");
    unsigned char copy[64];
    memset(copy, 0xA5, n + 1);
    memcpy(copy, buf, n);
    ok = copy[n] == 0xA5;
    for (size_t i = 0; i < n; i++) {
        ok &= copy[i] == i;
    }
    check(ok, "memcpy memset");

    unsigned char small[2];
    unsigned char exact[3];
    check(argc > 1 && kg_read_file(argv[1], small, sizeof small) == KG_ESIZE, "file too long");
    check(argc > 1 && kg_read_file(argv[1], buf, 4) == KG_ESIZE, "file too short");
    check(argc > 1 && kg_read_file(argv[1], exact, sizeof exact) == 0 && exact[2] == 'c', "file exact");
    check(kg_read_file("no/such/file", exact, sizeof exact) == -2, "ENOENT");
    return 7;
}
