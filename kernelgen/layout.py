"""Layouts: TVM-style strings and index maps -> one index-map representation.

`nhwc-8h8w32c` and `{map: "n, h, w, c -> n, c // 4, h, |, w, c % 4"}` both become a
`Layout`: logical dims, one index expression per physical axis, and axis separators that
group physical axes into the dimensions of the flattened buffer (seed 004: no separator
= flat memory, one separator = a 2-D texture). Binding a layout to a logical shape gives a
`TensorLayout` with the physical shape (minimal padding, seed 003), flattened offsets as
C text, and numpy pack/unpack.
"""
from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Mapping

import numpy as np

import kernelgen.expr as E
import kernelgen.injective as injective

ACTIVATION_DIMS = ("n", "h", "w", "c")
FILTER_DIMS = ("o", "i", "h", "w")


class LayoutError(ValueError):
    """A layout that cannot describe its tensor; config.py attaches the file position."""


class PadKind(enum.Enum):
    """Seed 003's three contracts for the values that live in layout padding."""

    NONE = "none"  # never read or written: kernels must branch around it
    VALUE = "value"  # producers write pad_value, consumers may rely on it
    UNDEF = "undef"  # may hold anything and may be overwritten


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    source: str  # as the user wrote it, for messages
    name: str  # display name: NHWC8h8w32c, or the index map text
    dims: tuple[str, ...]  # logical dims, in the tensor's logical order
    outputs: tuple[E.Expr, ...]  # one expression per physical axis
    separators: tuple[int, ...] = ()  # physical axis positions where a new flattened dim starts
    pad_kind: PadKind = PadKind.NONE
    pad_value: float = 0.0
    blocks: tuple[tuple[int, str], ...] = ()  # inner blocks of a string layout: ((8, 'h'), (8, 'w'), (32, 'c'))

    def block_factor(self, dim: str) -> int | None:
        """Product of a dim's inner block factors, None when the layout does not block it."""
        factors = [f for f, d in self.blocks if d == dim]
        return math.prod(factors) if factors else None

    def __post_init__(self) -> None:
        if any(not 0 < s < len(self.outputs) for s in self.separators):
            raise LayoutError(f"axis separator out of range in {self.source!r}")

    @property
    def physical_rank(self) -> int:
        """Rank of the flattened buffer: 1 = flat memory, 2 = a 2-D texture."""
        return len(self.separators) + 1

    @property
    def map_text(self) -> str:
        groups = self.groups()
        rhs = ", |, ".join(", ".join(E.to_text(self.outputs[i]) for i in g) for g in groups)
        return f"{', '.join(self.dims)} -> {rhs}"

    def groups(self) -> tuple[tuple[int, ...], ...]:
        cuts = (0, *self.separators, len(self.outputs))
        return tuple(tuple(range(a, b)) for a, b in zip(cuts, cuts[1:]))

    def with_padding(self, kind: PadKind, value: float = 0.0) -> "Layout":
        return Layout(source=self.source, name=self.name, dims=self.dims, outputs=self.outputs,
                      separators=self.separators, pad_kind=kind, pad_value=value, blocks=self.blocks)

    def bind(self, shape: tuple[int, ...]) -> "TensorLayout":
        return _bound(self, tuple(map(int, shape)))


_BOUND: dict[tuple[int, tuple[int, ...]], "TensorLayout"] = {}
_MAX_BOUND = 8192


def _bound(layout: Layout, shape: tuple[int, ...]) -> "TensorLayout":
    """One TensorLayout per (layout, shape): it is immutable, and the schedule search binds the same few cache
    windows thousands of times (each bind checks the layout's bounds and works out its physical shape once).
    Keyed by the layout's identity, not its value (hashing a layout walks all its expressions); an entry keeps
    its layout alive, so an id is never reused while its entry stands."""
    key = (id(layout), shape)
    bound = _BOUND.get(key)
    if bound is None:
        if len(_BOUND) >= _MAX_BOUND:
            _BOUND.clear()
        bound = _BOUND[key] = TensorLayout(layout=layout, logical_shape=shape)
    return bound


# ---------------------------------------------------------------- parsing

_STRING = re.compile(r"^([A-Za-z]+)(?:-?((?:\d+[A-Za-z])+))?$")
_BLOCK = re.compile(r"(\d+)([A-Za-z])")


@lru_cache(maxsize=1024)
def parse_layout(spec: str, dims: tuple[str, ...], *, pad: object = None) -> Layout:
    """Parse a TVM-style string or an index map (`"->"` present) for a tensor with `dims`. Layouts are immutable:
    configs that spell the same one share it, and with it their bound windows (_bound), as kernelgen import's
    hundreds of candidate configs do."""
    text = spec.strip()
    layout = _parse_map(text, dims) if "->" in text else _parse_string(text, dims)
    if pad is None:
        return layout
    if pad == "undef":
        return layout.with_padding(PadKind.UNDEF)
    return layout.with_padding(PadKind.VALUE, float(pad))  # type: ignore[arg-type]


def _parse_string(text: str, dims: tuple[str, ...]) -> Layout:
    match = _STRING.match(text)
    if not match:
        raise LayoutError(f"not a layout string like 'nhwc-8h8w32c': {text!r}")
    outer = match.group(1).lower()
    blocks = [(int(f), d.lower()) for f, d in _BLOCK.findall(match.group(2) or "")]
    if sorted(outer) != sorted(dims):
        raise LayoutError(
            f"layout {text!r} names dims {','.join(outer)} but the tensor has {len(dims)} dims "
            f"{','.join(dims)}")
    for factor, dim in blocks:
        if dim not in dims:
            raise LayoutError(f"block '{factor}{dim}' in {text!r}: unknown dim {dim!r} (dims are {','.join(dims)})")
        if factor < 1:
            raise LayoutError(f"block '{factor}{dim}' in {text!r}: block factors must be >= 1")
    outputs: list[E.Expr] = []
    for dim in outer:
        total = math.prod(f for f, d in blocks if d == dim)
        outputs.append(E.floordiv(E.Var(dim), total))
    for index, (factor, dim) in enumerate(blocks):
        # The first block written for a dim is its outermost sub-block: 8i32o4i splits i as (i % 32) // 4, i % 4.
        inner = math.prod(f for f, d in blocks[index + 1:] if d == dim)
        outputs.append(E.floordiv(E.floormod(E.Var(dim), factor * inner), inner))
    name = outer.upper() + "".join(f"{f}{d}" for f, d in blocks)
    return Layout(source=text, name=name, dims=dims, outputs=tuple(outputs), blocks=tuple(blocks))


def _parse_map(text: str, dims: tuple[str, ...]) -> Layout:
    lhs, _, rhs = text.partition("->")
    names = tuple(n.strip() for n in lhs.split(","))
    if any(not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names):
        raise LayoutError(f"index map {text!r}: the left side must list dim names, got {lhs.strip()!r}")
    if len(names) != len(dims):
        raise LayoutError(f"index map {text!r} has {len(names)} input dims but the tensor has {len(dims)} ({','.join(dims)})")
    if len(set(names)) != len(names):
        raise LayoutError(f"index map {text!r}: repeated input dim")
    outputs: list[E.Expr] = []
    separators: list[int] = []
    for item in (i.strip() for i in rhs.split(",")):
        if item == "|":
            if not outputs or (separators and separators[-1] == len(outputs)):
                raise LayoutError(f"index map {text!r}: '|' must separate two groups of axes")
            separators.append(len(outputs))
            continue
        try:
            expression = E.parse(item)
        except E.ExprSyntaxError as error:
            raise LayoutError(f"index map {text!r}: {error}") from None
        unknown = E.variables(expression) - set(names)
        if unknown:
            raise LayoutError(f"index map {text!r}: unknown dim {sorted(unknown)[0]!r} (inputs are {', '.join(names)})")
        # Rename positional input names to the tensor's logical dims.
        outputs.append(E.substitute(expression, {n: E.Var(d) for n, d in zip(names, dims)}))
    if not outputs or (separators and separators[-1] == len(outputs)):
        raise LayoutError(f"index map {text!r}: empty output group")
    return Layout(source=text, name=text, dims=dims, outputs=tuple(outputs), separators=tuple(separators))


def listed_order(spec: str) -> tuple[str, ...]:
    """The order a config lists an activation's `shape` in: its layout string's letters (NCHW and nchw-4c list
    [n, c, h, w]; NHWC and nhwc-8h8w32c [n, h, w, c]), so a shape reads as the model that gave it writes it. An
    index map's left side names the dims positionally as n, h, w, c, and a text that is no layout is reported by
    the layout check: both list [n, h, w, c]."""
    match = _STRING.match(spec.strip()) if "->" not in spec else None
    letters = tuple(match.group(1).lower()) if match else ()
    return letters if sorted(letters) == sorted(ACTIVATION_DIMS) else ACTIVATION_DIMS


def logical_of_listed(shape: tuple[int, ...], order: tuple[str, ...]) -> tuple[int, ...]:
    """A shape listed in `order` as the logical NHWC shape every stage after the config loader works in."""
    extent = dict(zip(order, shape))
    return tuple(extent[d] for d in ACTIVATION_DIMS)


def listed_of_logical(shape: tuple[int, ...], order: tuple[str, ...]) -> tuple[int, ...]:
    """A logical NHWC shape as a config lists it for a layout of that `order` (logical_of_listed's inverse)."""
    extent = dict(zip(ACTIVATION_DIMS, shape))
    return tuple(extent[d] for d in order)


# ---------------------------------------------------------------- a layout bound to a shape

@dataclass(frozen=True, kw_only=True)
class TensorLayout:
    layout: Layout
    logical_shape: tuple[int, ...]
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.logical_shape) != len(self.layout.dims):
            raise LayoutError(f"layout {self.layout.source!r} has rank {len(self.layout.dims)}, "
                              f"the tensor has rank {len(self.logical_shape)}")
        for out in self.layout.outputs:
            lo, _ = E.interval(out, self.bounds)
            if lo < 0:
                raise LayoutError(f"layout {self.layout.source!r}: {E.to_text(out)} can be negative")

    @property
    def bounds(self) -> dict[str, tuple[int, int]]:
        return {d: (0, n - 1) for d, n in zip(self.layout.dims, self.logical_shape)}

    @cached_property
    def physical_shape(self) -> tuple[int, ...]:
        return tuple(E.interval(out, self.bounds)[1] + 1 for out in self.layout.outputs)

    @cached_property
    def flat_shape(self) -> tuple[int, ...]:
        """Shape of the buffer after flattening each axis-separator group (1-D, 2-D, ...)."""
        return tuple(math.prod(self.physical_shape[i] for i in g) for g in self.layout.groups())

    @cached_property
    def size(self) -> int:
        return math.prod(self.physical_shape)

    @property
    def logical_size(self) -> int:
        return math.prod(self.logical_shape)

    @property
    def padding(self) -> int:
        return self.size - self.logical_size

    # -------------------------------------------------------- index expressions

    def offsets(self, index: Mapping[str, E.Expr], bounds: Mapping[str, tuple[int, int]]) -> tuple[E.Expr, ...]:
        """Flattened offset per physical dim for a logical index given as expressions."""
        physical = [E.simplify(E.substitute(out, index), bounds) for out in self.layout.outputs]
        result = []
        for group in self.layout.groups():
            stride, terms = 1, []
            for i in reversed(group):
                terms.append(E.mul(physical[i], stride))
                stride *= self.physical_shape[i]
            result.append(E.add(*reversed(terms)))
        return tuple(result)

    def flat_offset(self, index: Mapping[str, E.Expr], bounds: Mapping[str, tuple[int, int]]) -> E.Expr:
        """The element offset into flat memory: row-major across every flattened group. The one
        place flat-offset arithmetic is written; every target addresses buffers through it."""
        terms, stride = [], 1
        for off, extent in reversed(list(zip(self.offsets(index, bounds), self.flat_shape))):
            terms.append(E.mul(off, stride))
            stride *= extent
        return E.add(*reversed(terms))

    def offset_c(self, index: Mapping[str, E.Expr], bounds: Mapping[str, tuple[int, int]]) -> str:
        """flat_offset as one C expression."""
        return E.to_c(self.flat_offset(index, bounds))

    # -------------------------------------------------------- numpy pack / unpack

    def _coordinates(self) -> tuple[np.ndarray, ...]:
        """Flat physical coordinates (one array per flattened dim) of every logical element."""
        if "coords" not in self._cache:
            grids = np.ogrid[tuple(slice(0, n) for n in self.logical_shape)]
            values = {d: g.astype(np.int64) for d, g in zip(self.layout.dims, grids)}
            physical = [np.broadcast_to(np.asarray(E.evaluate(o, values), dtype=np.int64), self.logical_shape)
                        for o in self.layout.outputs]
            coords = []
            for group in self.layout.groups():
                flat = np.zeros(self.logical_shape, dtype=np.int64)
                for i in group:
                    flat = flat * self.physical_shape[i] + physical[i]
                coords.append(flat)
            self._cache["coords"] = tuple(coords)
        return self._cache["coords"]

    def _per_dim_outputs(self) -> dict[str, list[int]] | None:
        """Outputs grouped by the one dim each depends on; None when some output mixes dims."""
        groups: dict[str, list[int]] = {d: [] for d in self.layout.dims}
        for index, out in enumerate(self.layout.outputs):
            used = E.variables(out)
            if len(used) > 1:
                return None
            for dim in used:
                groups[dim].append(index)
        return groups

    def slice_injective(self, dim: str, outputs: list[int], extent: int) -> bool:
        """Whether dim's own outputs tell its values 0..extent-1 apart (in time independent of extent)."""
        try:
            return injective.injective(tuple(self.layout.outputs[i] for i in outputs), dim, extent)
        except injective.TooLargeToCheck as error:
            raise LayoutError(f"layout {self.layout.source!r}: cannot check it for shape {list(self.logical_shape)}"
                              f" ({error}); use smaller block factors") from None

    def check_injective(self) -> None:
        if self.layout.blocks or "->" not in self.layout.source:
            return  # a layout string splits each dim mixed-radix: injective by construction
        groups = self._per_dim_outputs()
        if groups is not None:
            # Each output reads one dim: the map is injective iff every dim's slice is.
            ok = all(self.slice_injective(d, groups[d], n) for d, n in zip(self.layout.dims, self.logical_shape))
        else:
            _check_pointwise(self, self.logical_size)
            hit = np.zeros(self.flat_shape, dtype=bool)
            hit[self._coordinates()] = True
            ok = int(hit.sum()) == self.logical_size  # fewer distinct slots than elements
        if not ok:
            raise LayoutError(f"layout {self.layout.source!r} is not injective for shape "
                              f"{list(self.logical_shape)}: two logical elements share a physical slot")

    def padding_mask(self) -> np.ndarray:
        """True at physical positions (flat shape) that hold no logical element."""
        mask = np.ones(self.flat_shape, dtype=bool)
        mask[self._coordinates()] = False
        return mask

    def pack(self, logical: np.ndarray, *, sentinel: float | int | None = None) -> np.ndarray:
        """Logical array -> physical buffer (flat shape); padding gets pad_value, else the sentinel."""
        if tuple(logical.shape) != self.logical_shape:
            raise LayoutError(f"pack: expected shape {list(self.logical_shape)}, got {list(logical.shape)}")
        if self.layout.pad_kind is PadKind.VALUE:
            fill = self.layout.pad_value
        else:
            fill = sentinel if sentinel is not None else default_sentinel(logical.dtype)
        physical = np.full(self.flat_shape, fill, dtype=logical.dtype)
        physical[self._coordinates()] = logical
        return physical

    def unpack(self, physical: np.ndarray) -> np.ndarray:
        physical = np.asarray(physical).reshape(self.flat_shape)
        return physical[self._coordinates()]


def default_sentinel(dtype: np.dtype) -> float | int:
    """NaN for floats, 0xA5 for integers (STYLE.md rule 11)."""
    return float("nan") if np.issubdtype(dtype, np.floating) else 0xA5


def padding_cover(bound: TensorLayout) -> tuple[int, ...]:
    """Logical extents, grown to whole blocks, whose image covers every padding slot.

    Kernels write pad_value by running the forward index map over this grown domain and
    storing where a coordinate is past the logical extent: no inverse map needed.
    Raises LayoutError when growing the domain cannot reach some padding slot.
    """
    extents = []
    for dim, extent in zip(bound.layout.dims, bound.logical_shape):
        block = 1
        for out in bound.layout.outputs:
            for divisor in _divisors_of(out, dim):
                block = math.lcm(block, divisor)
        extents.append(-(-extent // block) * block)
    grown = TensorLayout(layout=bound.layout, logical_shape=tuple(extents))
    if tuple(grown.physical_shape) != tuple(bound.physical_shape):
        covered = False
    elif (groups := bound._per_dim_outputs()) is not None:
        # Separable map: the image is a product, so each dim must reach all of its outputs' slots, each
        # once (a grown coordinate landing on a real element's slot would let the fill overwrite it).
        covered = all(n == math.prod(bound.physical_shape[i] for i in groups[d]) and
                      grown.slice_injective(d, groups[d], n) for d, n in zip(bound.layout.dims, extents))
    else:
        _check_pointwise(grown, math.prod(extents))
        hit = np.zeros(bound.flat_shape, dtype=bool)
        hit[grown._coordinates()] = True
        covered = bool(hit.all())
    if not covered:
        raise LayoutError(f"layout {bound.layout.source!r}: cannot enumerate its padding for shape "
                          f"{list(bound.logical_shape)}; drop pad_value or use a blocked layout")
    return tuple(extents)


# An index map whose outputs mix dims (`h * 8 + w`) is checked element by element: only up to this many.
POINTWISE_ELEMENTS = 1 << 24


def _check_pointwise(bound: TensorLayout, elements: int) -> None:
    if elements > POINTWISE_ELEMENTS:
        raise LayoutError(f"layout {bound.layout.source!r}: an output mixing dims is checked element by element, "
                          f"up to {POINTWISE_ELEMENTS} elements; shape {list(bound.logical_shape)} has {elements}")


def _divisors_of(expr: E.Expr, dim: str) -> list[int]:
    if isinstance(expr, (E.Var, E.Const)):
        return []
    if isinstance(expr, E.Add):
        return [d for t in expr.terms for d in _divisors_of(t, dim)]
    inner = _divisors_of(expr.expr, dim)
    if isinstance(expr, (E.FloorDiv, E.FloorMod)) and dim in E.variables(expr.expr):
        inner.append(expr.divisor)
    return inner
