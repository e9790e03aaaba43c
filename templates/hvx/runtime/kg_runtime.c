/* kg_runtime.c: process entry, Linux system calls and printers for freestanding HVX
 * programs under qemu-hexagon. See kg_runtime.h for the interface. */
#include "kg_runtime.h"

/* Hexagon Linux system call numbers (asm-generic table). */
enum {
    KG_SYS_OPENAT = 56,
    KG_SYS_CLOSE = 57,
    KG_SYS_READ = 63,
    KG_SYS_WRITE = 64,
    KG_SYS_EXIT_GROUP = 94,
    KG_SYS_CLOCK_GETTIME = 113, /* the 32-bit time_t call; QEMU answers it from the host's clock */
    KG_SYS_MUNMAP = 215,
    KG_SYS_MMAP2 = 222, /* __NR3264_mmap: mmap2 on 32-bit ABIs (offset in pages; always 0 here) */
    KG_SYS_MPROTECT = 226,
};
/* asm-generic mmap flags and protections. */
#define KG_PROT_NONE 0
#define KG_PROT_READ 1
#define KG_PROT_WRITE 2
#define KG_MAP_PRIVATE 0x02
#define KG_MAP_ANONYMOUS 0x20
#define KG_AT_FDCWD (-100)
#define KG_EINTR 4

/* The kernel takes the number in r6 and arguments in r0..r5, returns in r0 and
 * preserves every other register. */
static long kg_syscall4(long nr, long a, long b, long c, long d)
{
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r3 __asm__("r3") = d;
    register long r6 __asm__("r6") = nr;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3), "r"(r6) : "memory");
    return r0;
}

static long kg_syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r3 __asm__("r3") = d;
    register long r4 __asm__("r4") = e;
    register long r5 __asm__("r5") = f;
    register long r6 __asm__("r6") = nr;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r5), "r"(r6) : "memory");
    return r0;
}

/* Linux starts a process with sp pointing at argc, followed by the argv pointers.
 * The stack is realigned to 128 bytes (one HVX vector), more than the ABI's 8, so
 * that no frame starts misaligned for vector spills; lr and fp are zeroed to end
 * backtraces. */
__asm__(".text\n"
        ".globl _start\n"
        ".type _start, @function\n"
        "_start:\n"
        "  r0 = memw(r29+#0)\n"
        "  r1 = add(r29, #4)\n"
        "  r29 = and(r29, #-128)\n"
        "  r31 = #0\n"
        "  r30 = #0\n"
        "  call kg_start_main\n"
        ".size _start, .-_start\n");

_Noreturn void kg_start_main(int argc, char **argv);

_Noreturn void kg_start_main(int argc, char **argv)
{
    kg_exit(main(argc, argv));
}

_Noreturn void kg_exit(int code)
{
    for (;;) {
        kg_syscall4(KG_SYS_EXIT_GROUP, code, 0, 0, 0);
    }
}

int kg_open(const char *path, int flags)
{
    return (int)kg_syscall4(KG_SYS_OPENAT, KG_AT_FDCWD, (long)path, flags, 0644);
}

int kg_close(int fd)
{
    return (int)kg_syscall4(KG_SYS_CLOSE, fd, 0, 0, 0);
}

long kg_read_all(int fd, void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        long got = kg_syscall4(KG_SYS_READ, fd, (long)((char *)buf + done), (long)(n - done), 0);
        if (got == -KG_EINTR) {
            continue;
        }
        if (got < 0) {
            return got;
        }
        if (got == 0) {
            break;
        }
        done += (size_t)got;
    }
    return (long)done;
}

long kg_write_all(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        long put = kg_syscall4(KG_SYS_WRITE, fd, (long)((const char *)buf + done), (long)(n - done), 0);
        if (put == -KG_EINTR) {
            continue;
        }
        if (put < 0) {
            return put;
        }
        done += (size_t)put;
    }
    return (long)done;
}

int kg_read_file(const char *path, void *buf, size_t n)
{
    int fd = kg_open(path, KG_O_RDONLY);
    if (fd < 0) {
        return fd;
    }
    long got = kg_read_all(fd, buf, n);
    char extra;
    /* One more byte must hit end of file, or the file is longer than the buffer. */
    long more = got == (long)n ? kg_read_all(fd, &extra, 1) : 0;
    kg_close(fd);
    if (got < 0) {
        return (int)got;
    }
    if (more < 0) {
        return (int)more;
    }
    return got == (long)n && more == 0 ? 0 : KG_ESIZE;
}

int kg_write_file(const char *path, const void *buf, size_t n)
{
    int fd = kg_open(path, KG_O_WRONLY | KG_O_CREAT | KG_O_TRUNC);
    if (fd < 0) {
        return fd;
    }
    long put = kg_write_all(fd, buf, n);
    int closed = kg_close(fd);
    if (put < 0) {
        return (int)put;
    }
    return closed;
}

static size_t kg_strlen(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

void kg_fputs(int fd, const char *s)
{
    kg_write_all(fd, s, kg_strlen(s));
}

void kg_puts(const char *s)
{
    kg_fputs(KG_STDOUT, s);
    kg_fputs(KG_STDOUT, "\n");
}

/* Decimal digits by subtracting powers of ten: Hexagon has no divide instruction
 * and the runtime should not depend on the division helpers in kg_libcalls.c. */
void kg_put_u64(int fd, uint64_t v)
{
    static const uint64_t powers[20] = {
        10000000000000000000ull, 1000000000000000000ull, 100000000000000000ull,
        10000000000000000ull, 1000000000000000ull, 100000000000000ull,
        10000000000000ull, 1000000000000ull, 100000000000ull, 10000000000ull,
        1000000000ull, 100000000ull, 10000000ull, 1000000ull, 100000ull,
        10000ull, 1000ull, 100ull, 10ull, 1ull,
    };
    char text[21];
    size_t len = 0;
    for (size_t i = 0; i < 20; i++) {
        char digit = '0';
        while (v >= powers[i]) {
            v -= powers[i];
            digit++;
        }
        if (digit != '0' || len > 0 || i == 19) {
            text[len++] = digit;
        }
    }
    text[len] = '\0';
    kg_fputs(fd, text);
}

void kg_put_i64(int fd, int64_t v)
{
    if (v < 0) {
        kg_fputs(fd, "-");
        kg_put_u64(fd, 0u - (uint64_t)v); /* also right for INT64_MIN */
        return;
    }
    kg_put_u64(fd, (uint64_t)v);
}

void kg_put_hex32(int fd, uint32_t v)
{
    char text[11] = "0x";
    for (int i = 0; i < 8; i++) {
        text[2 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xfu];
    }
    text[10] = '\0';
    kg_fputs(fd, text);
}

_Noreturn void kg_die(const char *msg, long code)
{
    kg_fputs(KG_STDERR, "kg: ");
    kg_fputs(KG_STDERR, msg);
    kg_fputs(KG_STDERR, " (");
    kg_put_i64(KG_STDERR, code);
    kg_fputs(KG_STDERR, ")\n");
    kg_exit(1);
}

void kg_report_counters(const char *label, kg_counters_t before, kg_counters_t after)
{
    /* Unsigned subtraction gives the right delta across one 32-bit wrap. */
    kg_fputs(KG_STDOUT, "kg_counters ");
    kg_fputs(KG_STDOUT, label);
    kg_fputs(KG_STDOUT, " packets=");
    kg_put_u64(KG_STDOUT, (uint32_t)(after.packets - before.packets));
    kg_fputs(KG_STDOUT, " instructions=");
    kg_put_u64(KG_STDOUT, (uint32_t)(after.instructions - before.instructions));
    kg_fputs(KG_STDOUT, " hvx_instructions=");
    kg_put_u64(KG_STDOUT, (uint32_t)(after.hvx_instructions - before.hvx_instructions));
    kg_fputs(KG_STDOUT, "\n");
}

/* One mapping per buffer: [guard | data rounded up to KG_GUARD_BYTES | guard], the guards PROT_NONE and the
 * whole aligned to KG_GUARD_BYTES, so that the guards are whole pages (QEMU's hexagon pages are 64 KiB).
 * Never unmapped: a driver allocates a few per run and exits. */
void *kg_guarded(size_t n, size_t align, int at_end)
{
    const size_t g = KG_GUARD_BYTES;
    const size_t data = (n + g - 1) / g * g + (n == 0 ? g : 0);
    const size_t total = data + 3 * g; /* two guards and the slack to align the first one */
    long base = kg_syscall6(KG_SYS_MMAP2, 0, (long)total, KG_PROT_READ | KG_PROT_WRITE,
                            KG_MAP_PRIVATE | KG_MAP_ANONYMOUS, -1, 0);
    if (base < 0 && base > -4096) {
        kg_die("mmap failed for a guarded buffer", base);
    }
    const uintptr_t lo = ((uintptr_t)base + g - 1) & ~(uintptr_t)(g - 1);
    const uintptr_t hi = lo + g + data;
    long a = kg_syscall4(KG_SYS_MPROTECT, (long)lo, (long)g, KG_PROT_NONE, 0);
    long b = kg_syscall4(KG_SYS_MPROTECT, (long)hi, (long)g, KG_PROT_NONE, 0);
    if (a != 0 || b != 0) {
        kg_die("mprotect failed for a guard page", a != 0 ? a : b);
    }
    /* At the end: n rounded up to the alignment ends at the guard (an aligned 128-byte HVX load never crosses it). */
    return (void *)(at_end ? hi - (n + align - 1) / align * align : lo + g);
}

/* Fresh zeroed memory from the kernel, never returned (kg_libc.c's malloc sits on it). */
void *kg_pages(size_t n)
{
    long base = kg_syscall6(KG_SYS_MMAP2, 0, (long)(n ? n : 1), KG_PROT_READ | KG_PROT_WRITE,
                            KG_MAP_PRIVATE | KG_MAP_ANONYMOUS, -1, 0);
    return base < 0 && base > -4096 ? NULL : (void *)base;
}

/* CLOCK_MONOTONIC in nanoseconds (the host's, under QEMU user mode). */
uint64_t kg_clock_ns(void)
{
    long now[2] = {0, 0}; /* struct timespec of the 32-bit ABI: seconds, nanoseconds */
    kg_syscall4(KG_SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, (long)now, 0, 0);
    return (uint64_t)(unsigned long)now[0] * 1000000000u + (uint64_t)(unsigned long)now[1];
}
