"""Names a config may not take, because the name becomes an identifier in generated code.

A config's `name` is the C function of the c and hvx kernels (`void NAME(...)`), the prefix
of every OpenCL `__kernel` and Vulkan entry (`NAME_conv1`), and the stem of every output
file. A bare keyword (`int`), a C library function (`memcpy`, `exit`: the harnesses link
libc) or a language builtin (`clamp`, `texture`) as that name gives sources that do not
compile, or that call the wrong function. Each list is the keyword or builtin section of
its language's standard, as far as lower-case names matching ^[a-z][a-z0-9_]*$ go.
"""
from __future__ import annotations

MAX_NAME_LENGTH = 64  # file names stay far below NAME_MAX (255) with the longest suffix added

# C23 keywords (C11's, plus bool/true/false/nullptr/constexpr/typeof...) and C11's _Keywords
# cannot match the pattern.
C_KEYWORDS = """
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
alignas alignof bool constexpr false nullptr static_assert thread_local true typeof typeof_unqual
""".split()

# The C standard library functions and macros the generated sources and harnesses include
# (stdlib, string, stdio, math, stdint, stddef, assert, errno, setjmp, signal) and the entry point.
C_LIBRARY = """
main abort atexit exit quick_exit malloc calloc realloc free aligned_alloc system getenv abs labs div atoi atol
strtol strtod qsort bsearch rand srand memcpy memmove memset memcmp memchr strcpy strncpy strcat strcmp strlen
strchr strstr printf fprintf sprintf snprintf puts fputs putchar getchar fopen fclose fread fwrite fflush
stdin stdout stderr errno assert setjmp longjmp signal raise offsetof size_t ptrdiff_t intptr_t uintptr_t
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t nan nanf inf infinity fabs fabsf sqrt sqrtf
exp expf log logf pow powf floor floorf ceil ceilf round roundf fmin fminf fmax fmaxf fmaf sin cos tan isnan
isinf isfinite
""".split()

# OpenCL C 3.0: keywords, address-space and access qualifiers, vector and image types, and the
# builtins the emitted kernels call (work-item, math, image, vector load/store, sync).
_VECTOR_BASES = "char uchar short ushort int uint long ulong half float double bool".split()
OPENCL = """
kernel __kernel global local constant private read_only write_only read_write uchar ushort uint ulong half
image2d_t image3d_t sampler_t event_t get_global_id get_local_id get_group_id get_global_size get_local_size
get_num_groups barrier mem_fence clamp mad fma min max mix dot cross sign step smoothstep native_exp
read_imagef read_imageh read_imagei write_imagef write_imageh write_imagei vload2 vload4 vload8 vload16
vstore2 vstore4 vstore8 vstore16 vload_half vstore_half vload_half4 vstore_half4 convert_float convert_half
as_float as_int
""".split() + [f"{base}{n}" for base in _VECTOR_BASES for n in (2, 3, 4, 8, 16)]

# GLSL 4.50 (Vulkan): keywords, types and qualifiers, and the lower-case builtins (the others,
# imageStore or floatBitsToUint, are camelCase and cannot match a config name).
GLSL = """
attribute uniform varying buffer shared coherent readonly writeonly layout centroid flat smooth
noperspective patch sample subroutine in out inout invariant precise discard lowp mediump highp precision
vec2 vec3 vec4 ivec2 ivec3 ivec4 uvec2 uvec3 uvec4 bvec2 bvec3 bvec4 dvec2 dvec3 dvec4 mat2 mat3 mat4
sampler2d image2d texture barrier radians degrees normalize reflect refract length distance
""".split()

RESERVED = frozenset(C_KEYWORDS + C_LIBRARY + OPENCL + GLSL)


def reserved_in(name: str) -> str | None:
    """The language a name is reserved in, or None."""
    for language, names in (("C", C_KEYWORDS), ("the C library", C_LIBRARY), ("OpenCL C", OPENCL),
                            ("GLSL", GLSL)):
        if name in names:
            return language
    return None
