/* What one core reaches on the issue-50 depthwise (3x3, pad 1, 112x112x96 NHWC, bias, relu6) with a loop order of
 * its own: a reference point for the c target's direct depthwise tile, not a kernel kernelgen ships. That tile took
 * the same three parts in its own order (targets/c/tile.py DIRECT_GROUP, depthwise_epilogue.py, streaming.py).
 *
 *   gcc -O3 -march=native -ffp-contract=fast benchmarks/depthwise_row_stream.c -o /tmp/dw_rows -lm && /tmp/dw_rows
 *
 * Per output row, per vector of channels (16 floats with AVX-512F, else 8): the 9 taps' filter vectors and the
 * bias stay in registers; 8 output pixels at a time take their 10 input columns of each kernel row once (a sliding
 * window: 30 loads for 72 FMAs, where the c target's direct tile loads its filter vector again for every FMA). While
 * a row is computed, the input row the next one adds is prefetched, and the outputs go out as streaming stores (no
 * read for ownership, no dirty line pushed out of the caches). Each variant is checked against a scalar loop; times
 * are CPU time of the thread, cold right after a STREAM triad over 3 x 64 MiB, warm again at once. The triad's
 * rate (two arrays read, one written) is printed beside them: the depthwise moves input + output once each.
 *
 * Zen 4 (AMD EPYC family 25 model 17, KVM), issue 50, session 19, best of 7: kernelgen's direct tile 0.90 ms cold /
 * 0.56 warm (0.36 of the triad). Here, 16-float vectors: rows 0.92 / 0.25, with the prefetch 0.69 cold, with streaming
 * stores 0.58, with both 0.45 (0.85 of the triad). 8-float vectors (-march=haswell): rows 1.05 / 0.40, with the
 * prefetch 0.78; streaming stores of half lines, the two halves written far apart, took 1.8-2.0 ms: a streaming
 * store pays off only when it writes whole 64-byte lines together. */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { H = 112, W = 112, C = 96, PIXELS = 8 };

#if defined(__AVX512F__)
enum { V = 16 };
typedef __m512 vec;
#define LOADU _mm512_loadu_ps
#define SPLAT _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define MAX _mm512_max_ps
#define MIN _mm512_min_ps
#define STORE _mm512_storeu_ps
#define STREAM _mm512_stream_ps
#else
enum { V = 8 };
typedef __m256 vec;
#define LOADU _mm256_loadu_ps
#define SPLAT _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define MAX _mm256_max_ps
#define MIN _mm256_min_ps
#define STORE _mm256_storeu_ps
#define STREAM _mm256_stream_ps
#endif

/* filter [C][3][3] (OIHW, one input channel a group) repacked [tap][C] once, as the c target's filter cache is */
static void rows(const float *in, const float *taps, const float *bias, float *out, int prefetch, int stream) {
    const vec zero = SPLAT(0.0f), six = SPLAT(6.0f);
    for (int oh = 0; oh < H; ++oh) {
        for (int c = 0; c < C; c += V) {
            vec w[9];
            for (int t = 0; t < 9; ++t) w[t] = LOADU(taps + t * C + c);
            const vec b = LOADU(bias + c);
            for (int ow = 0; ow < W; ow += PIXELS) {
                if (prefetch && oh + 2 < H)  /* the input row output row oh + 1 adds: a row's compute ahead */
                    for (int p = 0; p < PIXELS; ++p) __builtin_prefetch(in + ((oh + 2) * W + ow + p) * C + c, 0, 3);
                vec acc[PIXELS];
                for (int p = 0; p < PIXELS; ++p) acc[p] = b;
                for (int rh = 0; rh < 3; ++rh) {
                    const int ih = oh + rh - 1;
                    if (ih < 0 || ih >= H) continue;
                    vec x[PIXELS + 2];
                    for (int j = 0; j < PIXELS + 2; ++j) {
                        const int iw = ow - 1 + j;
                        x[j] = iw >= 0 && iw < W ? LOADU(in + (ih * W + iw) * C + c) : zero;
                    }
                    for (int p = 0; p < PIXELS; ++p) {
                        acc[p] = FMA(x[p], w[rh * 3], acc[p]);
                        acc[p] = FMA(x[p + 1], w[rh * 3 + 1], acc[p]);
                        acc[p] = FMA(x[p + 2], w[rh * 3 + 2], acc[p]);
                    }
                }
                float *o = out + (oh * W + ow) * C + c;
                for (int p = 0; p < PIXELS; ++p) {
                    const vec y = MIN(MAX(acc[p], zero), six);
                    if (stream) STREAM(o + p * C, y); else STORE(o + p * C, y);
                }
            }
        }
    }
    _mm_sfence();
}

static void scalar(const float *in, const float *filter, const float *bias, float *out) {
    for (int oh = 0; oh < H; ++oh)
        for (int ow = 0; ow < W; ++ow)
            for (int c = 0; c < C; ++c) {
                float s = bias[c];
                for (int rh = 0; rh < 3; ++rh)
                    for (int rw = 0; rw < 3; ++rw) {
                        const int ih = oh + rh - 1, iw = ow + rw - 1;
                        if (ih >= 0 && ih < H && iw >= 0 && iw < W) s += in[(ih * W + iw) * C + c] * filter[c * 9 + rh * 3 + rw];
                    }
                out[(oh * W + ow) * C + c] = fminf(fmaxf(s, 0.0f), 6.0f);
            }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { TRIAD = 16 << 20 };  /* floats per triad array: 64 MiB */
static float *ta, *tb, *tc;
static double triad(void) {
    const double t = now();
    for (long i = 0; i < TRIAD; ++i) ta[i] = tb[i] + 3.0f * tc[i];
    return now() - t;
}

static float *huge(size_t floats) {  /* 2 MiB pages where the kernel allows them, as kernelgen places tensors */
    float *p = aligned_alloc(2 << 20, (floats * 4 + (2 << 20) - 1) / (2 << 20) * (2 << 20));
    memset(p, 0, floats * 4);
    return p;
}

int main(void) {
    const long n = (long)H * W * C;
    float *in = huge(n), *out = huge(n), *want = huge(n), filter[C * 9], taps[9 * C], bias[C];
    ta = huge(TRIAD), tb = huge(TRIAD), tc = huge(TRIAD);
    srand(50);
    for (long i = 0; i < n; ++i) in[i] = rand() / (float)RAND_MAX * 2.0f - 0.5f;
    for (int i = 0; i < C * 9; ++i) filter[i] = rand() / (float)RAND_MAX - 0.3f;
    for (int i = 0; i < C; ++i) bias[i] = rand() / (float)RAND_MAX - 0.5f;
    for (int c = 0; c < C; ++c) for (int t = 0; t < 9; ++t) taps[t * C + c] = filter[c * 9 + t];
    scalar(in, filter, bias, want);
    const char *names[] = {"rows", "rows + next-row prefetch", "rows + streaming stores", "rows + both"};
    printf("depthwise 3x3 %dx%dx%d + bias + relu6, %d-float vectors; ms (GB/s counting input and output once)\n",
           H, W, C, V);
    for (int variant = 0; variant < 4; ++variant) {
        const int prefetch = variant & 1, stream = variant >> 1;
        memset(out, 0, n * 4);
        rows(in, taps, bias, out, prefetch, stream);
        double err = 0;
        for (long i = 0; i < n; ++i) err = fmax(err, fabs(out[i] - want[i]));
        double cold = 1e9, warm = 1e9, tri = 1e9;
        for (int r = 0; r < 7; ++r) {  /* the best of 7: a busy moment reads slow, never fast */
            tri = fmin(tri, triad());
            double t = now();
            rows(in, taps, bias, out, prefetch, stream);
            cold = fmin(cold, now() - t);
            t = now();
            rows(in, taps, bias, out, prefetch, stream);
            warm = fmin(warm, now() - t);
        }
        const double bytes = 2.0 * n * 4, triad_gbs = 3.0 * TRIAD * 4 / tri / 1e9;
        printf("%-26s cold %.3f ms (%.1f GB/s, %.2f of the triad's %.1f)  warm %.3f ms  max error %.1e\n", names[variant],
               cold * 1e3, bytes / cold / 1e9, bytes / cold / 1e9 / triad_gbs, triad_gbs, warm * 1e3, err);
    }
    return 0;
}
