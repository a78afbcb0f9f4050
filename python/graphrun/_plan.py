"""A job's arrays as the runtime takes them: the gr_tensor array, the outputs, and what the
job must hold until it is complete.

Jobs of many small tensors are common (12,800 tensors of 64 KiB is a row of the
benchmarks), so the work per tensor is kept to a few attribute reads: each port's arrays
are scanned in one loop that takes plain NumPy arrays and CPU tensors of the port's type,
C-contiguous, straight to their data pointers, and leaves anything else (other objects,
other types, non-contiguous arrays, reinterpret wrappers, read-only outputs) to the general
path (_arrays.as_buf and check below), which reads, checks and refuses exactly as it always
has. The gr_tensor array is a NumPy structured array of gr_tensor's layout, filled a column
at a time. The job holds the port lists themselves (its own copies of the caller's
sequences), the outputs it allocated and the Bufs of the general path: no object per
tensor is made for the memory contract.
"""
import ctypes

import numpy as np

from . import _arrays, _pinned
from . import _lib as _c


def _tensor_dtype():
    t = _c.Tensor
    return np.dtype({
        "names": ["in", "out", "elems", "rank", "shape"],
        "formats": [(np.uint64, _c.GR_MAX_PORTS), (np.uint64, _c.GR_MAX_PORTS), np.uint64,
                    np.uint32, (np.uint64, _c.GR_MAX_DIMS)],
        "offsets": [t.in_.offset, t.out.offset, t.elems.offset, t.rank.offset,
                    t.shape.offset],
        "itemsize": ctypes.sizeof(t)})


TENSOR = _tensor_dtype()


class Refused(Exception):
    """A refusal of the job: the message, and the index it names."""

    def __init__(self, message, index=None):
        super().__init__(message)
        self.message, self.index = message, index


class Column:
    """One port's arrays, scanned: per index the object as the user gave it, its data
    pointer, element count, shape and writability; `bufs` holds the general path's Bufs by
    index, `missing` the indices of an output port left to graphrun (None)."""

    __slots__ = ("objs", "ptrs", "sizes", "shapes", "writable", "bufs", "missing")


def _ptr(a, from_buffer=ctypes.c_char.from_buffer, addressof=ctypes.addressof):
    """The data pointer of a C-contiguous, non-empty ndarray: through the buffer protocol,
    about three times faster than a.ctypes.data, where the array is writable."""
    if a.flags.writeable:
        try:
            return addressof(from_buffer(a))
        except (TypeError, ValueError, BufferError):
            pass
    return a.ctypes.data


def check(obj, port, what, index, copy, output):
    """The Buf for one array of a port by the general path: its type, layout and (outputs)
    writability checked; a non-contiguous one copied with copy=True."""
    try:
        b = _arrays.as_buf(obj, what)
    except _arrays._Refusal as r:
        raise Refused(f"{what} {r}", index) from None
    if b.dtype != port.dtype:
        hint = ""
        if port.dtype == "bfloat16" and b.dtype == "uint16":
            hint = " (for bfloat16 bit patterns use graphrun.reinterpret(a, 'bfloat16'))"
        raise Refused(f"{what} holds {b.dtype} but the graph's port holds {port.dtype}{hint}",
                      index)
    if output and not b.writable:
        raise Refused(f"{what} is read-only", index)
    if not b.contiguous:
        if not copy:
            raise Refused(f"{what} is not C-contiguous (shape {b.shape}): pass a contiguous "
                          "array (numpy.ascontiguousarray, tensor.contiguous()) or copy=True "
                          "to let graphrun copy it", index)
        b = _arrays.contiguous_copy(b)
    return b


def scan(objs, port, p, output, copy, torch):
    """The Column of one port's arrays (a list of the job's own)."""
    n = len(objs)
    col = Column()
    col.objs = objs
    ptrs = col.ptrs = [0] * n
    sizes = col.sizes = [0] * n
    shapes = col.shapes = [()] * n
    writable = col.writable = [True] * n
    col.bufs = {}
    col.missing = []
    name = port.dtype
    npd = _arrays.numpy_dtype(name)
    if name == "bfloat16" and _arrays._ml_dtypes is None:
        npd = None  # uint16 arrays are bit patterns only through reinterpret
    ndarray = np.ndarray
    from_buffer, addressof = ctypes.c_char.from_buffer, ctypes.addressof
    tensor = td = strided = None
    if torch is not None:
        tensor, td, strided = torch.Tensor, getattr(torch, name), torch.strided
    slow = []
    for i, a in enumerate(objs):
        t = type(a)
        if t is ndarray:
            d = a.dtype
            if (d is npd or d == npd) and npd is not None:
                f = a.flags
                w = f.writeable
                if f.c_contiguous and (w or not output):
                    s = a.size
                    sizes[i] = s
                    shapes[i] = a.shape
                    if not w:
                        writable[i] = False
                        if s:
                            ptrs[i] = a.ctypes.data
                    elif s:
                        try:  # _ptr, inline: this loop runs once per tensor
                            ptrs[i] = addressof(from_buffer(a))
                        except (TypeError, ValueError, BufferError):
                            ptrs[i] = a.ctypes.data
                    continue
        elif t is tensor:
            if a.dtype is td and a.is_cpu and a.layout is strided and a.is_contiguous():
                s = a.numel()
                sizes[i] = s
                shapes[i] = a.shape
                if s:
                    ptrs[i] = a.data_ptr()
                continue
        elif a is None and output:
            col.missing.append(i)
            continue
        slow.append(i)
    kind = "output" if output else "input"
    for i in slow:
        b = check(objs[i], port, f"{kind} {p} of index {i}", i, copy, output)
        col.bufs[i] = b
        ptrs[i], sizes[i], shapes[i], writable[i] = b.ptr, b.size, b.shape, b.writable
    return col


def missing(n):
    """The Column of an output port left to graphrun whole (outputs=None)."""
    col = Column()
    col.objs = [None] * n
    col.ptrs = [0] * n
    col.sizes = [0] * n
    col.shapes = [()] * n
    col.writable = [True] * n
    col.bufs = {}
    col.missing = list(range(n))
    return col


def _sizes_agree(col, port, elems, what):
    """Refuses the first index whose array has not the port's element count: the fixed
    size, else the tensor's (`elems`, per index)."""
    n = len(col.sizes)
    if len(col.missing) == n:
        return
    want = port.fixed_elems or elems
    if not col.missing:
        if isinstance(want, int) and col.sizes.count(want) == n:
            return
        if not isinstance(want, int) and col.sizes == want:
            return
    miss = set(col.missing)
    for i in range(n):
        w = want if isinstance(want, int) else want[i]
        if i in miss or col.sizes[i] == w:
            continue
        why = ("the port's fixed size" if port.fixed_elems
               else "the tensor's (its first input's)")
        raise Refused(f"{what} of index {i} has {col.sizes[i]} elements; it needs {w}, {why}",
                      i)


def _owner(col, i):
    """What the caller gets back for index i of a column: the very object passed (the
    array inside a reinterpret wrapper; the user's array for a copy=True copy)."""
    b = col.bufs.get(i)
    if b is None:
        return col.objs[i]
    return b.copy_back if b.copy_back is not None else b.owner


def _kind_of(col, i):
    """The array itself behind index i (the Buf's array on the general path)."""
    b = col.bufs.get(i)
    return col.objs[i] if b is None else b.array


# New NumPy outputs of small tensors are rows of shared blocks (as np.split returns views):
# one allocation for up to GROUP_BLOCK bytes of outputs of one kind and shape instead of
# one each. A 64 KiB numpy.empty costs 2-3 us (dev), a row of a block a tenth of that
# (pinned_empty's: 3.6 us and 0.4); on the device, adjacent outputs of one allocation go
# as one copy range, where outputs of separate allocations cost the driver a lookup each.
# A row keeps its whole block alive: at most GROUP_BLOCK bytes a kept output, hence small
# tensors only. Tensors keep a storage of their own: a row of a block would be saved whole
# by torch.save, shared whole with another process, and (from unbind) refused in-place
# autograd, which PyTorch users do not expect of a function's result. Pinned tensors are
# the exception: a torch.empty(pin_memory=True) each cost about 5 us (H100) and gave each
# output a driver allocation of its own, which the copy engines pay for per tensor, so
# their outputs are row views of pinned blocks from PyTorch's own allocator
# (_torch_pinned: it keeps a block that PyTorch is still copying from being reused).
# Bytes a tensor, at most, for its output to share a block: below the registration cache's
# least range (GR_HOST_CACHE_MIN_BYTES), so that no cache entry spans two rows, which
# rt.forget of one would tie to the other.
GROUP_TENSOR_MAX = 512 << 10
# Bytes a block, at most: pinned NumPy blocks then come from graphrun's pool
# (runtime/hostpool.h serves requests of up to 2 MiB), pinned tensors' from PyTorch's
# caching host allocator (blocks of that size kept for reuse), rather than being
# page-locked anew.
GROUP_BLOCK = 2 << 20
_ROW_ALIGN = 64     # each row starts as aligned as its block does
_ROW_DIMS_MAX = 31  # a block adds a dimension to its rows'; NumPy 1 allows 32


def _allocate(port, shape, lead, torch, pinned=None):
    """A new output for `port`, as NumPy and PyTorch make one: of the lead input's kind (a
    tensor for a tensor, else a NumPy array) and in memory like the lead's (pinned where
    the package can tell that the lead is pinned, else ordinary), shaped as the lead (a
    fixed port: (fixed_elems,)). Tensors are made on the CPU whatever PyTorch's default
    device. `pinned`: whether a tensor lead is pinned, where the caller has asked (each
    is_pinned() is a driver query)."""
    out_shape = (port.fixed_elems,) if port.fixed_elems else tuple(shape)
    as_torch = torch if (torch is not None and lead is not None and
                         isinstance(lead, torch.Tensor)) else None
    if as_torch is not None and (lead.is_pinned() if pinned is None else pinned):
        # PyTorch's caching host allocator: page-locking is slow (about 0.5 ms a MiB on the
        # H200), and PyTorch keeps the blocks of dropped tensors for the next call.
        return _torch_pinned(torch, out_shape, port.dtype)
    if as_torch is not None:
        td = getattr(torch, port.dtype)
        if lead.dtype is td and tuple(lead.shape) == out_shape:
            return torch.empty_like(lead, memory_format=torch.contiguous_format)
        return torch.empty(out_shape, dtype=td, device="cpu")
    return _new_array(_array_kind(lead), out_shape, port.dtype)


def _array_kind(lead):
    """The memory of a new NumPy output for an input `lead` that is no tensor: "pinned"
    where the package knows the lead to be pinned (pinned_empty memory, through any views,
    or a pinned tensor's), else "numpy"."""
    return "pinned" if lead is not None and _pinned.is_pinned(lead) else "numpy"


def _new_array(kind, shape, name):
    """A new NumPy array of `kind` (_array_kind), `shape` and graphrun type `name`."""
    if kind == "pinned":
        return _pinned.new(tuple(shape), name)
    return np.empty(shape, _arrays.numpy_dtype(name))


def _groupable(shape, nbytes):
    """Whether an output of `shape` and `nbytes` may be a row of a shared block: small, not
    empty, not a scalar (a block's row of a scalar is no array), rows kept aligned, and a
    dimension to spare for the block's."""
    return (0 < nbytes <= GROUP_TENSOR_MAX and nbytes % _ROW_ALIGN == 0 and
            0 < len(shape) <= _ROW_DIMS_MAX)


def _torch_pinned(torch, shape, name):
    """An uninitialized pinned CPU tensor from PyTorch's caching host allocator, which
    records PyTorch's non_blocking copies from and to its blocks and reuses a freed block
    only once they are done (memory graphrun allocated would be reused at once)."""
    return torch.empty(shape, dtype=getattr(torch, name), device="cpu", pin_memory=True)


def _allocate_grouped(pending, name, res, ptrs, allocated, torch):
    """The outputs `pending` asks for ((kind, shape, nbytes) -> indices), as rows of blocks
    of at most GROUP_BLOCK bytes (a lone one as an array of its own): NumPy arrays, or for
    the kind "torch_pinned" row views of pinned tensors (_torch_pinned)."""
    for (kind, shape, nbytes), idx in pending.items():
        as_torch = kind == "torch_pinned"
        per = max(1, GROUP_BLOCK // nbytes)
        for at in range(0, len(idx), per):
            some = idx[at:at + per]
            if len(some) == 1:
                a = (_torch_pinned(torch, shape, name) if as_torch
                     else _new_array(kind, shape, name))
                res[some[0]], ptrs[some[0]] = a, _new_ptr(a, torch)
                allocated.append(a)
                continue
            if as_torch:
                block = _torch_pinned(torch, (len(some),) + shape, name)
                base = block.data_ptr()
                allocated.append(block)
                # Views by index, not unbind's: autograd allows in-place writes to these.
                for j, i in enumerate(some):
                    res[i] = block[j]
                    ptrs[i] = base + j * nbytes
                continue
            block = _new_array(kind, (len(some),) + shape, name)
            allocated.append(block)
            # Row j lies j rows past the block's start: no pointer read per row.
            base = _ptr(block)
            for j, (i, a) in enumerate(zip(some, block)):
                res[i] = a
                ptrs[i] = base + j * nbytes


def _new_ptr(a, torch):
    if torch is not None and isinstance(a, torch.Tensor):
        return a.data_ptr() if a.numel() else 0
    return _ptr(a) if a.size else 0


class Plan:
    """What _submit needs: `tensors` (the gr_tensor array), `results` (per output port,
    what result() gives per index), `keep` (what the job holds until complete),
    `copy_backs` (Bufs written back into the caller's arrays on completion), `copies`
    (every Buf that is the package's own copy of an array) and `defaults_in_place` (default
    outputs put over an input)."""

    __slots__ = ("tensors", "results", "keep", "copy_backs", "copies", "defaults_in_place")


def build(graph, ins, outs, count, copy, inplace):
    """The Plan of a job: `ins` (and `outs`, or None) per port, lists of the job's own."""
    torch = _arrays._torch()
    ndarray = np.ndarray
    n_in, n_out = len(graph.inputs), len(graph.outputs)
    cin = [scan(ins[p], graph.inputs[p], p, False, copy, torch) for p in range(n_in)]
    if outs is None:
        cout = [missing(count) for _ in range(n_out)]
    else:
        cout = [scan(outs[p], graph.outputs[p], p, True, copy, torch) for p in range(n_out)]

    # The tensor's element count and shape: its first input of a size of its own, or
    # (every input fixed) its first such given output.
    lead = next((p for p, port in enumerate(graph.inputs) if not port.fixed_elems), None)
    if lead is not None:
        elems, shapes, leads = cin[lead].sizes, cin[lead].shapes, cin[lead]
        lead_of = None
    else:
        elems, shapes = [1] * count, [()] * count
        free = [p for p, port in enumerate(graph.outputs) if not port.fixed_elems]
        lead_of = [None] * count
        for i in range(count):
            q = next((p for p in free if cout[p].objs[i] is not None), None)
            if q is None and free:
                raise Refused(f"index {i}: every input port of {graph.name} has a fixed "
                              "size, so the tensor's size must come from an output: pass "
                              "outputs", i)
            if q is not None:
                lead_of[i] = q
                elems[i], shapes[i] = cout[q].sizes[i], cout[q].shapes[i]
        leads = None
    for p, port in enumerate(graph.inputs):
        _sizes_agree(cin[p], port, elems, f"input {p}")
    for p, port in enumerate(graph.outputs):
        _sizes_agree(cout[p], port, elems, f"output {p}")

    results = [list(cout[p].objs) for p in range(n_out)]
    out_ptrs = [cout[p].ptrs for p in range(n_out)]
    copy_backs = []
    for p in range(n_out):
        for i, b in cout[p].bufs.items():
            results[p][i] = _owner(cout[p], i)
            if b.copy_back is not None:
                copy_backs.append(b)
    allocated = []
    defaults_in_place = 0
    for p, port in enumerate(graph.outputs):
        todo = cout[p].missing
        if not todo:
            continue
        cands = sorted(graph.in_place[p]) if inplace else ()
        if n_out == 1 and cands and len(todo) == count:
            # The common case at once: every output over the same input port.
            c = cin[cands[0]]
            if not c.bufs and False not in c.writable and \
                    (c.sizes.count(port.fixed_elems) == count if port.fixed_elems
                     else c.sizes == elems):
                out_ptrs[p] = list(c.ptrs)
                results[p] = list(c.objs)
                defaults_in_place += count
                continue
        res, ptrs = results[p], out_ptrs[p]
        fixed = (port.fixed_elems,) if port.fixed_elems else None
        size = _arrays.SIZE[port.dtype]
        tensor = td = contiguous = None
        if torch is not None:
            tensor, td = torch.Tensor, getattr(torch, port.dtype)
            contiguous = torch.contiguous_format
        pending = {}  # (kind, shape, bytes) -> indices, for _allocate_grouped
        for i in todo:
            want = port.fixed_elems or elems[i]
            taken = None
            for q in cands:
                c = cin[q]
                if not c.writable[i] or c.sizes[i] != want:
                    continue
                ptr = c.ptrs[i]
                # Memory another output of this tensor already has is never taken twice.
                if n_out > 1 and any(out_ptrs[o][i] == ptr for o in range(n_out)
                                     if o != p and (cout[o].objs[i] is not None or o < p)):
                    continue
                taken = q
                break
            if taken is not None:
                c = cin[taken]
                ptrs[i] = c.ptrs[i]
                res[i] = _owner(c, i)
                b = c.bufs.get(i)
                if b is not None and b.copy_back is not None:
                    copy_backs.append(b)
                defaults_in_place += 1
                continue
            if leads is not None:
                lead_obj = _kind_of(leads, i)
            elif lead_of[i] is not None:
                lead_obj = _kind_of(cout[lead_of[i]], i)
            else:
                lead_obj = None
            t = type(lead_obj)
            as_tensor = t is tensor or (tensor is not None and isinstance(lead_obj, tensor))
            pinned = as_tensor and lead_obj.is_pinned()
            if not as_tensor or pinned:
                shape = fixed or tuple(shapes[i])
                nbytes = want * size
                if _groupable(shape, nbytes):
                    # An array that owns its memory is NumPy's own, so not pinned.
                    key = ("torch_pinned" if as_tensor else
                           "numpy" if t is ndarray and lead_obj.base is None
                           else _array_kind(lead_obj), shape, nbytes)
                    got = pending.get(key)
                    if got is None:
                        pending[key] = [i]
                    else:
                        got.append(i)
                    continue
            # The common case inline, as _allocate would make it: a tensor of the port's
            # type that PyTorch says is not pinned.
            if t is tensor and fixed is None and lead_obj.dtype is td and not pinned:
                a = torch.empty_like(lead_obj, memory_format=contiguous)
                ptrs[i] = a.data_ptr() if a.numel() else 0
            else:
                a = _allocate(port, shapes[i], lead_obj, torch, pinned if as_tensor else None)
                ptrs[i] = _new_ptr(a, torch)
            res[i] = a
            allocated.append(a)
        _allocate_grouped(pending, port.dtype, res, ptrs, allocated, torch)

    tensors = np.zeros(max(count, 1), TENSOR)
    for p in range(n_in):
        tensors["in"][:count, p] = cin[p].ptrs
    for p in range(n_out):
        tensors["out"][:count, p] = out_ptrs[p]
    tensors["elems"][:count] = elems
    _fill_shapes(tensors, shapes, count)

    plan = Plan()
    plan.tensors = tensors
    plan.results = results
    # The memory contract: every object of the job, held until it is complete.
    plan.keep = (ins, outs, allocated, [c.bufs for c in cin], [c.bufs for c in cout])
    plan.copy_backs = copy_backs
    plan.copies = [b for c in cin + cout for b in c.bufs.values() if b.copy_back is not None]
    plan.defaults_in_place = defaults_in_place
    return plan


def _dims(shape):
    """gr_tensor's rank and shape for an array's shape: more than GR_MAX_DIMS dimensions
    are merged into the first, keeping the last three."""
    dims = [int(d) for d in shape]
    if len(dims) > _c.GR_MAX_DIMS:
        merged = 1
        for d in dims[:len(dims) - 3]:
            merged *= d
        dims = [merged] + dims[len(dims) - 3:]
    return len(dims), dims


def _fill_shapes(tensors, shapes, count):
    if not count:
        return
    first = shapes[0]
    if shapes.count(first) == count:  # one shape for the whole job: a broadcast
        rank, dims = _dims(first)
        tensors["rank"][:count] = rank
        if rank:
            tensors["shape"][:count, :rank] = dims
        return
    seen = {}
    rows = np.zeros((count, _c.GR_MAX_DIMS), np.uint64)
    ranks = np.zeros(count, np.uint32)
    for i, s in enumerate(shapes):
        key = tuple(s)
        r = seen.get(key)
        if r is None:
            rank, dims = _dims(key)
            r = seen[key] = (rank, dims + [0] * (_c.GR_MAX_DIMS - rank))
        ranks[i] = r[0]
        rows[i] = r[1]
    tensors["rank"][:count] = ranks
    tensors["shape"][:count] = rows


def constants(graph, given, copy):
    """The contents of the graph's constants for gr_job_options: (a ctypes array of their
    host pointers, in the graph's order, or None; what the job must hold; the package's own
    copies among them, made with copy=True). Each array is
    checked against its declaration (name, element type, element count) as a port's arrays
    are, and refused naming the constant."""
    decl = graph.constants
    if given is None:
        given = {}
    elif not hasattr(given, "keys"):
        raise Refused(f"constants must be a dict of name -> array, not "
                      f"{type(given).__name__}")
    names = [c.name for c in decl]
    unknown = [k for k in given.keys() if k not in names]
    if unknown:
        have = ", ".join(names) if names else "none"
        raise Refused(f"constants: {graph.name} has no constant {unknown[0]!r} (it declares "
                      f"{have})")
    missing = [c for c in decl if c.name not in given]
    if missing:
        want = ", ".join(f"{c.name!r} ({c.dtype} {list(c.shape)})" for c in missing)
        raise Refused(f"constants: {graph.name} declares {want}, not given: pass "
                      f"constants={{{', '.join(repr(c.name) + ': ...' for c in missing)}}}")
    if not decl:
        return None, (), []
    ptrs = (ctypes.c_void_p * len(decl))()
    keep, copies = [], []
    for k, c in enumerate(decl):
        what = f"constant {c.name!r}"
        try:
            b = _arrays.as_buf(given[c.name], what)
        except _arrays._Refusal as r:
            raise Refused(f"{what} {r}") from None
        elems = 1
        for d in c.shape:
            elems *= d
        if b.dtype != c.dtype:
            raise Refused(f"{what} holds {b.dtype} but {graph.name} declares it "
                          f"{c.dtype} {list(c.shape)}")
        if b.size != elems:
            raise Refused(f"{what} has {b.size} elements (shape {b.shape}) but {graph.name} "
                          f"declares {c.dtype} {list(c.shape)}: {elems} elements")
        if not b.contiguous:
            if not copy:
                raise Refused(f"{what} is not C-contiguous (shape {b.shape}): pass a "
                              "contiguous array or copy=True to let graphrun copy it")
            b = _arrays.contiguous_copy(b)
            b.copy_back = None  # only read: nothing to write back
            copies.append(b)
        ptrs[k] = b.ptr
        keep.append(b)
    return ptrs, tuple(keep), copies
