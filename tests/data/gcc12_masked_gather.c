/* Issue 44's wrong max pool without kernelgen: a max over 3x3 taps whose position test sits inside a vectorized
   channel loop (the loop nest kernelgen's pools had).

     gcc 12.2 -std=c99 -O3 -march=haswell gcc12_masked_gather.c     -> "32 of 40 wrong" (also -mavx2 -mtune=haswell,
                                                                      -march=znver3; not -march=znver1, not -mavx2)
     gcc -O2, gcc -O3 -fno-tree-vectorize, clang-19 -O3 -march=haswell -> "0 of 40 wrong"
     gcc -O1 -fsanitize=undefined,address: clean (no undefined behaviour; every read lies inside x)

   gcc if-converts the loads into masked AVX2 gathers (vgatherdps). For the taps of the row rh == 2, whose test
   oh * 2 + rh < 10 it folds to true once oh is known not to be 4, the mask it builds is the constant
   {1, 1, 1, 1, 1, 1, 1, 1} (`.LC2+4`, the 1 of the vector {0, 1, ..., 7} it also uses) instead of all ones: a
   gather reads only the lanes whose mask has the sign bit set, so it reads none and the max takes the zeros its
   destination held. kernelgen now tests a tap's position outside the channel loop (planner/pooling.py). */
#include <stdio.h>

__attribute__((noinline)) void pool(const float *restrict x, float *restrict out)
{
  for (int oh = 0; oh < 5; ++oh) {
    float acc[16];
    for (int k = 0; k < 16; ++k) acc[k] = -1.0f;
    for (int k = 0; k < 16; ++k)
      if (k < 8)
        for (int rh = 0; rh < 3; ++rh)
          for (int rw = 0; rw < 3; ++rw)
            if (oh * 2 + rh < 10)
              acc[k] = x[oh * 144 + rh * 72 + rw * 8 + k] > acc[k] ? x[oh * 144 + rh * 72 + rw * 8 + k] : acc[k];
    for (int k = 0; k < 8; ++k) out[oh * 8 + k] = acc[k];
  }
}

int main(void)
{
  static float x[1024], out[40];
  for (int i = 0; i < 1024; ++i) x[i] = (float)i;  /* increasing: a window's max is its last tap inside */
  pool(x, out);
  int bad = 0;
  for (int oh = 0; oh < 5; ++oh)
    for (int k = 0; k < 8; ++k) {
      const int rh = oh * 2 + 2 < 10 ? 2 : 1;
      bad += out[oh * 8 + k] != x[oh * 144 + rh * 72 + 2 * 8 + k];
    }
  printf("%d of 40 wrong\n", bad);
  return bad != 0;
}
