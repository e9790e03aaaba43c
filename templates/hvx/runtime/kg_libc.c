/* kg_libc.c: the few C library functions a network program (templates/_common/program: main, kg_npy.h,
 * kg_weights.h) calls, for a freestanding Hexagon build under qemu-hexagon, on the system calls of kg_runtime.c.
 * The headers are qemu_libc/ (stdio.h, stdlib.h, string.h, time.h); a device build uses the Hexagon SDK's C
 * library instead and needs none of this.
 *
 * Kept small on purpose: a file opened for reading is read whole at fopen; writes go straight to the file;
 * malloc takes memory from mmap and free keeps it (a program runs once and exits). printf and friends:
 * kg_printf.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kg_runtime.h"

/* ------------------------------------------------------------------ memory */

#define KG_CHUNK_BYTES (4u << 20) /* small blocks come from 4 MiB mappings */

void *malloc(size_t size)
{
    static unsigned char *chunk;
    static size_t left;
    size = (size + 15u) & ~(size_t)15u;
    if (size > KG_CHUNK_BYTES / 4) {
        return kg_pages(size); /* mmap returns page-aligned memory */
    }
    if (size > left) {
        chunk = kg_pages(KG_CHUNK_BYTES);
        left = chunk ? KG_CHUNK_BYTES : 0;
        if (chunk == NULL) {
            return NULL;
        }
    }
    void *block = chunk;
    chunk += size;
    left -= size;
    return block;
}

void free(void *pointer)
{
    (void)pointer;
}

/* ------------------------------------------------------------------ strings */

int memcmp(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return 0;
}

size_t strlen(const char *text)
{
    size_t n = 0;
    while (text[n] != '\0') {
        n++;
    }
    return n;
}

int strncmp(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x != y || x == '\0') {
            return x - y;
        }
    }
    return 0;
}

int strcmp(const char *a, const char *b)
{
    return strncmp(a, b, (size_t)-1);
}

char *strchr(const char *text, int c)
{
    for (;; text++) {
        if (*text == (char)c) {
            return (char *)text;
        }
        if (*text == '\0') {
            return NULL;
        }
    }
}

char *strrchr(const char *text, int c)
{
    const char *last = NULL;
    for (;; text++) {
        if (*text == (char)c) {
            last = text;
        }
        if (*text == '\0') {
            return (char *)last;
        }
    }
}

char *strstr(const char *text, const char *part)
{
    const size_t n = strlen(part);
    for (; *text != '\0' || n == 0; text++) {
        if (strncmp(text, part, n) == 0) {
            return (char *)text;
        }
    }
    return NULL;
}

unsigned long strtoul(const char *text, char **end, int base)
{
    const char *p = text;
    while (*p == ' ') {
        p++;
    }
    const int negative = *p == '-';
    p += *p == '-' || *p == '+';
    unsigned long value = 0;
    const char *digits = p;
    while (*p >= '0' && *p <= '9' && base == 10) {
        value = value * 10u + (unsigned long)(*p++ - '0');
    }
    if (end != NULL) {
        *end = (char *)(p == digits ? text : p);
    }
    return negative ? 0ul - value : value;
}

long strtol(const char *text, char **end, int base)
{
    return (long)strtoul(text, end, base);
}

/* insertion sort: the program sorts its repeats' times */
void qsort(void *base, size_t count, size_t size, int (*compare)(const void *, const void *))
{
    unsigned char *items = base;
    unsigned char swap[64];
    if (size > sizeof swap) {
        kg_die("qsort: elements larger than 64 bytes", (long)size);
    }
    for (size_t i = 1; i < count; i++) {
        for (size_t j = i; j > 0 && compare(items + (j - 1) * size, items + j * size) > 0; j--) {
            memcpy(swap, items + j * size, size);
            memcpy(items + j * size, items + (j - 1) * size, size);
            memcpy(items + (j - 1) * size, swap, size);
        }
    }
}

/* ------------------------------------------------------------------ files */

struct kg_file {
    int fd;
    unsigned char *data; /* a file opened for reading: all of it */
    size_t size;
    size_t position;
};

static FILE kg_stdout = {KG_STDOUT, NULL, 0, 0};
static FILE kg_stderr = {KG_STDERR, NULL, 0, 0};
FILE *stdout = &kg_stdout;
FILE *stderr = &kg_stderr;

FILE *fopen(const char *path, const char *mode)
{
    const int reading = mode[0] == 'r';
    const int fd = kg_open(path, reading ? KG_O_RDONLY : KG_O_WRONLY | KG_O_CREAT | KG_O_TRUNC);
    if (fd < 0) {
        return NULL;
    }
    FILE *file = malloc(sizeof *file);
    if (file == NULL) {
        kg_close(fd);
        return NULL;
    }
    *file = (FILE){fd, NULL, 0, 0};
    if (!reading) {
        return file;
    }
    size_t capacity = 1u << 16;
    for (;;) { /* read until a read comes back short, doubling the buffer */
        unsigned char *grown = malloc(capacity);
        if (grown == NULL) {
            kg_close(fd);
            return NULL;
        }
        memcpy(grown, file->data, file->size);
        file->data = grown;
        const long got = kg_read_all(fd, file->data + file->size, capacity - file->size);
        if (got < 0) {
            kg_close(fd);
            return NULL;
        }
        file->size += (size_t)got;
        if (file->size < capacity) {
            return file;
        }
        capacity *= 2;
    }
}

int fclose(FILE *file)
{
    return kg_close(file->fd) == 0 ? 0 : EOF;
}

size_t fread(void *data, size_t size, size_t count, FILE *file)
{
    if (size == 0 || file->data == NULL) {
        return 0;
    }
    size_t n = (file->size - file->position) / size;
    n = n < count ? n : count;
    memcpy(data, file->data + file->position, n * size);
    file->position += n * size;
    return n;
}

size_t fwrite(const void *data, size_t size, size_t count, FILE *file)
{
    return size == 0 || kg_write_all(file->fd, data, size * count) < 0 ? 0 : count;
}

int fgetc(FILE *file)
{
    unsigned char c;
    return fread(&c, 1, 1, file) == 1 ? c : EOF;
}

int fseek(FILE *file, long offset, int whence)
{
    const long from = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (long)file->position : (long)file->size;
    if (file->data == NULL || from + offset < 0 || from + offset > (long)file->size) {
        return -1;
    }
    file->position = (size_t)(from + offset);
    return 0;
}

long ftell(FILE *file)
{
    return file->data == NULL ? -1 : (long)file->position;
}

int kg_file_fd(FILE *file); /* kg_printf.c writes through it */

int kg_file_fd(FILE *file)
{
    return file->fd;
}

/* ------------------------------------------------------------------ time */

int clock_gettime(clockid_t clock, struct timespec *now)
{
    (void)clock;
    const uint64_t ns = kg_clock_ns();
    now->tv_sec = (long)(ns / 1000000000u);
    now->tv_nsec = (long)(ns % 1000000000u);
    return 0;
}
