/* kg_runtime.h: the freestanding runtime that kernelgen links into every HVX program.
 *
 * Programs are built with -ffreestanding -nostdlib and run under qemu-hexagon (Linux
 * user mode), so there is no libc: this header gives them process entry (kg_runtime.c
 * defines _start, which calls main(argc, argv) and exits with its result), raw Linux
 * file I/O, small printers and QEMU's execution counters. kernelgen/toolchains/hexagon.py
 * compiles kg_runtime.c and kg_libcalls.c next to the program's own sources.
 */
#ifndef KG_RUNTIME_H
#define KG_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

int main(int argc, char **argv);

/* From kg_libcalls.c, which also defines the integer division helpers clang calls. */
void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memset(void *dst, int c, size_t n);
void *memmove(void *dst, const void *src, size_t n);
float nearbyintf(float x); /* round half to even (the default rounding mode) */

/* File I/O. Calls return a count or 0 on success, or -errno (Linux numbering) on failure. */
#define KG_STDOUT 1
#define KG_STDERR 2
/* asm-generic open flags, which the Hexagon Linux ABI uses. */
#define KG_O_RDONLY 00
#define KG_O_WRONLY 01
#define KG_O_CREAT 0100
#define KG_O_TRUNC 01000

int kg_open(const char *path, int flags); /* files created with mode 0644 */
long kg_read_all(int fd, void *buf, size_t n); /* up to n bytes; fewer only at end of file */
long kg_write_all(int fd, const void *buf, size_t n); /* all n bytes, or -errno */
int kg_close(int fd);
/* Whole-file helpers for test harnesses, whose buffer sizes are known exactly:
 * kg_read_file fails with KG_ESIZE unless the file holds exactly n bytes. */
#define KG_ESIZE (-1000)
int kg_read_file(const char *path, void *buf, size_t n);
int kg_write_file(const char *path, const void *buf, size_t n);

_Noreturn void kg_exit(int code);
/* Writes "kg: <msg> (<code>)" to stderr and exits 1; for harness checks, not kernels. */
_Noreturn void kg_die(const char *msg, long code);

/* Buffers between two PROT_NONE guard regions of KG_GUARD_BYTES each, so that the first access outside a buffer
 * faults with SIGSEGV instead of reading its neighbour (QEMU's hexagon-linux-user pages are 64 KiB,
 * TARGET_PAGE_BITS 16: its mprotect refuses a 4 KiB-aligned address with EINVAL). at_end = 1 places the buffer so
 * that it ends where the guard after it starts (its size rounded up to align, a power of two from 128, one HVX
 * vector, to KG_GUARD_BYTES), catching accesses past the end; 0 starts it right after the guard before it,
 * catching accesses before the start. Aligned to align either way; exits on failure. */
#define KG_GUARD_BYTES 65536u
void *kg_guarded(size_t n, size_t align, int at_end);
void *kg_pages(size_t n);   /* n bytes of fresh zeroed memory (mmap), never freed; NULL when none is left */
uint64_t kg_clock_ns(void); /* CLOCK_MONOTONIC, nanoseconds */

/* Printers; none of them divides (see kg_runtime.c). */
void kg_fputs(int fd, const char *s); /* no newline, like fputs */
void kg_puts(const char *s);          /* stdout plus newline, like puts */
void kg_put_u64(int fd, uint64_t v);
void kg_put_i64(int fd, int64_t v);
void kg_put_hex32(int fd, uint32_t v); /* 0x%08x */

/* QEMU execution counters. QEMU 7.2 keeps them in reserved user control registers
 * c20 (packets), c21 (instructions, counted inside packets) and c22 (HVX instructions);
 * real hardware has no such registers. They are 32 bits wide and wrap, so deltas are
 * exact (modulo 2^32) only for intervals under 2^32 packets. */
typedef struct {
    uint32_t packets;
    uint32_t instructions;
    uint32_t hvx_instructions;
} kg_counters_t;

static inline __attribute__((always_inline)) kg_counters_t kg_read_counters(void)
{
    /* The assembler has no names for c20..c22, so the transfers are hand-encoded
     * "Rd = Cs" words (0x6a000000 | s << 16 | d, parse bits 0b11 = end of packet).
     * One packet each: control-register transfers may only issue from slot 3.
     * The "memory" clobber keeps the compiler from moving loads and stores of the
     * measured work across the read. */
    register uint32_t packets __asm__("r0");
    register uint32_t instructions __asm__("r1");
    register uint32_t hvx __asm__("r2");
    __asm__ volatile(".word 0x6a14c000 /* r0 = c20 */\n"
                     ".word 0x6a15c001 /* r1 = c21 */\n"
                     ".word 0x6a16c002 /* r2 = c22 */"
                     : "=r"(packets), "=r"(instructions), "=r"(hvx)
                     :
                     : "memory");
    kg_counters_t c = {packets, instructions, hvx};
    return c;
}

/* Prints "kg_counters <label> packets=<n> instructions=<n> hvx_instructions=<n>" to stdout:
 * the line format kernelgen.toolchains.hexagon.parse_counters reads. The label must be
 * one word. */
void kg_report_counters(const char *label, kg_counters_t before, kg_counters_t after);

#endif /* KG_RUNTIME_H */
