/* kg_printf.c: vsnprintf, snprintf, fprintf and printf for a network program under qemu-hexagon (see kg_libc.c):
 * the conversions qemu_libc/stdio.h lists, enough for what the program and its headers print. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kg_runtime.h"

int kg_file_fd(FILE *file); /* kg_libc.c */

/* ------------------------------------------------------------------ printf */

typedef struct {
    char *text;
    size_t size;
    size_t length; /* what the whole output takes, written or not */
} kg_sink;

static void kg_emit(kg_sink *sink, char c)
{
    if (sink->length + 1 < sink->size) {
        sink->text[sink->length] = c;
    }
    sink->length++;
}

/* `digits` (most significant first) padded to `width`: with zeros after the sign, or spaces before or after */
static void kg_field(kg_sink *sink, const char *sign, const char *digits, size_t count, int width, int left, int zero)
{
    const int pad = width - (int)(strlen(sign) + count);
    for (int i = 0; !left && !zero && i < pad; i++) {
        kg_emit(sink, ' ');
    }
    for (const char *s = sign; *s != '\0'; s++) {
        kg_emit(sink, *s);
    }
    for (int i = 0; !left && zero && i < pad; i++) {
        kg_emit(sink, '0');
    }
    for (size_t i = 0; i < count; i++) {
        kg_emit(sink, digits[i]);
    }
    for (int i = 0; left && i < pad; i++) {
        kg_emit(sink, ' ');
    }
}

/* v in `base` into the end of buf[0 .. 63]; returns the first digit */
static char *kg_digits(uint64_t v, unsigned base, int upper, char *buf, int minimum)
{
    char *p = buf + 64;
    const char *names = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    do {
        *--p = names[v % base];
        v /= base;
        minimum--;
    } while (v != 0 || minimum > 0);
    return p;
}

/* a double as %.<precision>f, for the magnitudes a program prints (below 2^63 after scaling; others as inf) */
static void kg_fixed(kg_sink *sink, double value, int precision, int width, int left, int zero)
{
    char buf[160];
    const char *sign = value < 0 ? "-" : "";
    double magnitude = value < 0 ? -value : value;
    if (!(magnitude == magnitude)) {
        kg_field(sink, "", "nan", 3, width, left, 0);
        return;
    }
    precision = precision > 9 ? 9 : precision;
    uint64_t scale = 1;
    for (int i = 0; i < precision; i++) {
        scale *= 10u;
    }
    const double scaled = magnitude * (double)scale + 0.5; /* rounded half up: it only prints */
    if (!(scaled < 9.2e18)) {
        kg_field(sink, sign, "inf", 3, width, left, 0);
        return;
    }
    const uint64_t whole = (uint64_t)scaled;
    char *integer = kg_digits(whole / scale, 10, 0, buf, 1);
    size_t count = (size_t)(buf + 64 - integer);
    char number[100];
    memcpy(number, integer, count);
    if (precision > 0) {
        number[count++] = '.';
        char *fraction = kg_digits(whole % scale, 10, 0, buf + 80, precision);
        memcpy(number + count, fraction, (size_t)precision);
        count += (size_t)precision;
    }
    kg_field(sink, sign, number, count, width, left, zero);
}

int vsnprintf(char *text, size_t size, const char *format, va_list args)
{
    kg_sink sink = {text, size, 0};
    for (const char *f = format; *f != '\0'; f++) {
        if (*f != '%') {
            kg_emit(&sink, *f);
            continue;
        }
        int left = 0, zero = 0, width = 0, precision = -1, longs = 0, size_t_arg = 0;
        for (f++; *f == '-' || *f == '0'; f++) {
            left |= *f == '-';
            zero |= *f == '0';
        }
        if (*f == '*') {
            width = va_arg(args, int);
            f++;
        }
        for (; *f >= '0' && *f <= '9'; f++) {
            width = width * 10 + (*f - '0');
        }
        if (*f == '.') {
            precision = 0;
            if (*++f == '*') {
                precision = va_arg(args, int);
                f++;
            }
            for (; *f >= '0' && *f <= '9'; f++) {
                precision = precision * 10 + (*f - '0');
            }
        }
        for (; *f == 'l' || *f == 'h' || *f == 'z'; f++) {
            longs += *f == 'l';
            size_t_arg |= *f == 'z';
        }
        char buf[64];
        const char *sign = "";
        char *digits;
        uint64_t u;
        switch (*f) {
        case 'd':
        case 'i': {
            const int64_t v = longs == 2 ? va_arg(args, long long) : longs == 1 ? va_arg(args, long)
                            : size_t_arg ? (int64_t)va_arg(args, size_t) : va_arg(args, int);
            sign = v < 0 ? "-" : "";
            u = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
            digits = kg_digits(u, 10, 0, buf, precision > 0 ? precision : 1);
            kg_field(&sink, sign, digits, (size_t)(buf + 64 - digits), width, left, zero);
            break;
        }
        case 'u':
        case 'x':
        case 'X':
        case 'p':
            u = *f == 'p' ? (uint64_t)(uintptr_t)va_arg(args, void *)
              : longs == 2 ? va_arg(args, unsigned long long) : longs == 1 ? va_arg(args, unsigned long)
              : size_t_arg ? va_arg(args, size_t) : va_arg(args, unsigned int);
            digits = kg_digits(u, *f == 'u' ? 10 : 16, *f == 'X', buf, precision > 0 ? precision : 1);
            kg_field(&sink, *f == 'p' ? "0x" : "", digits, (size_t)(buf + 64 - digits), width, left, zero);
            break;
        case 'c':
            buf[0] = (char)va_arg(args, int);
            kg_field(&sink, "", buf, 1, width, left, 0);
            break;
        case 's': {
            const char *s = va_arg(args, const char *);
            size_t n = 0;
            while (s[n] != '\0' && (precision < 0 || n < (size_t)precision)) {
                n++;
            }
            kg_field(&sink, "", s, n, width, left, 0);
            break;
        }
        case 'f':
            kg_fixed(&sink, va_arg(args, double), precision < 0 ? 6 : precision, width, left, zero);
            break;
        case '%':
            kg_emit(&sink, '%');
            break;
        default:
            kg_die("printf: a conversion kg_libc.c does not format", *f);
        }
    }
    if (size > 0) {
        text[sink.length < size ? sink.length : size - 1] = '\0';
    }
    return (int)sink.length;
}

int snprintf(char *text, size_t size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    const int n = vsnprintf(text, size, format, args);
    va_end(args);
    return n;
}

static int kg_vfprintf(FILE *file, const char *format, va_list args)
{
    char text[1024];
    const int n = vsnprintf(text, sizeof text, format, args);
    const size_t length = n < (int)sizeof text ? (size_t)n : sizeof text - 1;
    return kg_write_all(kg_file_fd(file), text, length) < 0 ? -1 : n;
}

int fprintf(FILE *file, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    const int n = kg_vfprintf(file, format, args);
    va_end(args);
    return n;
}

int printf(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    const int n = kg_vfprintf(stdout, format, args);
    va_end(args);
    return n;
}
