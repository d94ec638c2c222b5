"""`explain`: what each fused task group of a graph will run, planned for a representative block.

For every group (in the order they run) it names the ops fused into one task, the numpy views
applied to source chunks, the number of tasks, and the program the planner chooses for the first
non-empty block assuming contiguous source chunks: the binding of each step, the Contiguize steps
it inserts and the cap that demanded each, the estimated cost, the candidate plans the planner
priced for each decision (costs, measured or prior, the winner and why), and the devices its tasks run on
(spread round-robin by block number where the backend has several). Groups are cut where ops
prefer different backends (`graph.family`); a group reading another group's result computed on
another backend says so, and how the result crosses (`graph.crossing`): device to device through
exported memory (Vulkan -> Cuda on one GPU), or through host memory (a numpy chunk between the two
tasks) and why. Backends whose bindings are left out (not usable here, or not chosen) are named with the
reason where the graph has ops they ship bindings for (an FFT names a missing CUDA; an index_select
does not), and that counts as the planner's one notice of them. A source given in non-native byte
order is named with where it becomes native. Sources held in device memory (`persist(device=True)`)
are named with the devices their blocks lie on; where those are several, tasks run on the device
holding most of their resident inputs' bytes, and each pair of devices says how a block of one
reaches the other (device to device through exported memory, or through host memory and why).
It plans; it runs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import dask.threaded
from dask.core import flatten

from lazyfuel import notices
from lazyfuel.backends.base import RowReader, RowStreamer, block_backend, block_home, devices, is_device_block
from lazyfuel.contracts.model import Backend
from lazyfuel.graph import crossing
from lazyfuel.graph.device_blocks import block_holder
from lazyfuel.graph.family import Families
from lazyfuel.graph.fuse import Partition, Task, recipe
from lazyfuel.graph.grouping import described, local_workers
from lazyfuel.graph.ir import Node, Rechunk, Source
from lazyfuel.graph.lower import groups_blocks
from lazyfuel.graph.task import Assembled, Gathered, Part, Runtime
from lazyfuel.graph.touched import kept_ways, priced, row_bound, streamable
from lazyfuel.planner import Planner, Program, describe_choices, describe_program
from lazyfuel.planner.explain import seconds
from lazyfuel.planner.placement import Placement
from lazyfuel.planner.plan import left_out_notice
from lazyfuel.registry import NoBindingError
from lazyfuel.settings import config


def explain_node(root: Node, runtime: Runtime, planner: Planner,
                 left_out: Mapping[Backend, str] | None = None, device: bool = False) -> str:
    """The explanation text for the graph ending at `root`; `left_out` (backend -> why, e.g. "not
    usable here: ...", default the planner's) names the backends with bindings that the planner
    does not plan over: those shipping bindings for the graph's ops are listed. With `device`
    the result is planned as `compute(device=True)` keeps it: in device memory."""
    prefer = Families(planner)
    partition = Partition.of(root, prefer)
    groups = _groups(root, partition)
    backends = ", ".join(b.name for b in planner.backends) or "none"
    lines = [f"lazyfuel plan: shape {root.shape} {root.dtype}, {len(groups)} fused node(s), "
             f"backends [{backends}]"]
    workers = local_workers(dask.threaded.get, {})
    grouping = described(root, config.task_bytes, workers) if groups and groups_blocks(root) else None
    if groups and not grouping and _resident_sources(root) and config.device_task_bytes:
        grouping = (f"  over resident blocks, compute() and persist(device=True) run several blocks of one "
                    f"device per task and command buffer (device_task_bytes {config.device_task_bytes}, "
                    f"at least one task per thread)")
    lines += [grouping] if grouping else []
    left = planner.left_out if left_out is None else dict(left_out)
    # the text names the left-out backends the graph needs, so planning it must not say so too
    held = [b for b in left if notices.claim(left_out_notice(b))]
    body: list[str] = _byte_order_conversions(root) + _resident_sources(root)
    ops: set[str] = set()
    if not groups:
        body.append("  a source as it is: nothing to run")
    ran: dict[str, tuple[int, Backend | None]] = {}  # group name -> (number, backend)
    for number, node in enumerate(groups, 1):
        body.append("")
        group, backend, chain_ops = _group(number, node, partition, planner, device and node is groups[-1])
        body.extend(group)
        body.extend(_crossings(node, backend, partition, ran, prefer))
        ran[node.name] = (number, backend)
        ops.update(chain_ops)
    needed = planner.left_out_for(ops)
    lines += [f"  {b.name}'s bindings are not planned over: {b.name} is {why}"
              for b, why in left.items() if b in needed]
    for b in held:
        if b not in needed:  # not said here: later work that needs it still hears of it
            notices.forget(left_out_notice(b))
    return "\n".join(lines + body)


def _byte_order_conversions(root: Node) -> list[str]:
    """A line per source given in non-native byte order: where it is converted to native order."""
    lines = []
    for node in _sources(root):
        if node.stored is not None:
            lines.append(f"  source {node.name} {node.shape}: stored as {node.stored.str} (non-native byte "
                         f"order); each chunk is converted to native {node.dtype} once as it is read (a "
                         f"byte-swapping pass in a task of its own), before any kernel")
    return lines


def _resident_sources(root: Node) -> list[str]:
    """A line per source whose blocks lie in device memory: on which devices; and, where blocks of
    the graph lie on several, how a block of one reaches another's work (`reach`)."""
    lines: list[str] = []
    homes: dict[tuple[Backend, int], object] = {}  # one block per device, to ask `reach`
    for node in _sources(root):
        graph, keys = node.array.__dask_graph__(), list(flatten(node.array.__dask_keys__()))
        if not keys or not is_device_block(graph.get(keys[0])):  # a persisted source holds them all
            continue
        held = [b for b in map(graph.get, keys) if is_device_block(b)]
        count: dict[tuple[Backend, int] | None, int] = {}
        for b in held:
            home = block_home(b)
            count[home] = count.get(home, 0) + 1
            if home is not None:
                homes.setdefault(home, b)
        where = ", ".join(f"{n} on {_label(h)}" for h, n in sorted(count.items(), key=lambda kv: str(kv[0])))
        lines.append(f"  source {node.name} {node.shape}: {len(held)} block(s) resident in device memory "
                     f"({where}); tasks run where their resident inputs lie (most bytes); numpy views and "
                     "rechunks of them are read through host memory")
    ordered = sorted(homes)
    for i, one in enumerate(ordered):
        for other in ordered[i + 1:]:
            reach = getattr(homes[one], "reach", None)
            how = reach(homes[other]) if reach is not None else "through host memory"
            lines.append(f"  blocks of {_label(one)} and {_label(other)} meet {how}")
    return lines


def _label(home: tuple[Backend, int] | None) -> str:
    if home is None:
        return "a device blocks are not spread over"
    labels = devices(home[0])
    name = labels[home[1]] if home[1] < len(labels) else "?"
    return f"{home[0].name} device #{home[1]} {name}"


def _sources(root: Node) -> list[Source]:
    """Every source under `root`, once each."""
    found, seen, todo = [], set(), [root]
    while todo:
        node = todo.pop()
        if node.name in seen:
            continue
        seen.add(node.name)
        todo.extend(node.inputs)
        if isinstance(node, Source):
            found.append(node)
    return found


def _crossings(node: Node, backend: Backend | None, partition: Partition,
               ran: dict[str, tuple[int, Backend | None]], prefer: Families) -> list[str]:
    """A line per earlier group whose result `node`'s group reads: why it is a task of its own
    when their ops prefer different backends, and the crossing when they plan on different ones."""
    lines = []
    for leaf in partition.rooted_at(node).leaves(node):
        via = ""
        while isinstance(leaf, Rechunk):
            leaf, via = leaf.input, " (rechunked on the host)"
        number, source = ran.get(leaf.name, (None, None))
        if number is None:
            continue
        mine, theirs = prefer.of_group(node), prefer.of_group(leaf)
        if mine is not None and theirs is not None and mine is not theirs:
            lines.append(f"  cut from fused node {number}: its ops prefer {theirs.name}, this one "
                         f"{mine.name} (one program runs on one backend)")
        if source is not None and backend is not None and source is not backend:
            how = crossing.describe(source, backend, rechunked=bool(via))
            lines.append(f"  crossing: reads fused node {number}'s result{via}, computed on "
                         f"{source.name}, {how}")
    return lines


def _groups(root: Node, partition: Partition) -> list[Node]:
    """Group roots, each after the groups it reads (sources and rechunks are not groups)."""
    order: list[Node] = []
    seen: set[str] = set()

    def visit(node: Node) -> None:
        if node.name in seen or isinstance(node, Source):
            return
        seen.add(node.name)
        if isinstance(node, Rechunk):
            visit(node.input)
            return
        for leaf in partition.rooted_at(node).leaves(node):
            visit(leaf)
        order.append(node)

    visit(root)
    return order


def _group(number: int, node: Node, partition: Partition, planner: Planner,
           kept: bool = False) -> tuple[list[str], Backend | None, list[str]]:
    """The lines describing one group, the backend its representative block plans on, and the ops
    of its chain; with `kept` its result is wanted in device memory (`compute(device=True)`)."""
    blocks = node.blocks()
    head = (f"fused node {number}: {node.label} -> shape {node.shape}, {len(blocks)} task(s), "
            f"chunks {node.chunks}")
    block = next((b for b in blocks if math.prod(recipe_shape(node, b)) > 0), None)
    if block is None:
        return [head, "  every block is empty: nothing runs"], None, []
    task = recipe(partition, node, block)
    lines = [head]
    for plan in partition.pieces.values():
        if any(isinstance(k[0], tuple) and k[0][1] == plan.select.name for k in task.keys):
            what = "elements" if plan.flat else f"rows along axis {plan.select.dim}"
            lines.append(f"  {plan.select.label} reads each of its {len(plan.reads)} source chunk(s) once: "
                         f"one read task per chunk cuts the {what} every block needs into pieces")
    lines.append(f"  representative block {block}: reads {len(task.keys)} "
                 f"{'piece set(s)' if any(isinstance(k[0], tuple) for k in task.keys) else 'chunk(s)'}")
    lines.extend(_inputs(task))
    if task.recipe.chain is None:
        lines.append("  views only: numpy views of the source chunks, no kernel runs")
        return lines, None, []
    ops = [n.op for n in task.recipe.chain.nodes]
    lines.append(f"  chain (one task, one program): {' -> '.join(ops)}")
    dtypes, layouts = task.recipe.signature(task.metas)
    holder = _holder() if kept else None
    placement = _placement(task, partition.rooted_at(node).leaves(node), holder and holder[0])
    try:
        program = planner.plan(task.recipe.chain, dtypes, layouts, placement)
    except NoBindingError as err:
        lines.append(f"  no plan: {err}")
        return lines, None, ops
    streamed = _streaming(task, dtypes, layouts, planner, holder, placement)
    program = _staging(task, dtypes, layouts, planner, program, lines, placement)
    lines.extend(streamed)
    lines.append(describe_program(program, indent="  "))
    lines.append(describe_choices(program, indent="  ", forced=_forced(planner)))
    lines.append(_devices(program.backend, len(blocks)))
    inserted = [s for s in program.steps if s.reason]
    if inserted:
        lines.append(f"  {len(inserted)} Contiguize step(s) inserted by the planner:")
        lines.extend(f"    - {s.reason}" for s in inserted)
    if task.recipe.post:
        lines.append(f"  then numpy views of the result: {', '.join(op for op, _ in task.recipe.post)}")
    return lines, program.backend, ops


def _holder() -> tuple[Backend, object] | None:
    """The backend (and executor) that keeps a result in device memory, None where none can."""
    try:
        return block_holder(0)
    except RuntimeError:
        return None


def _streaming(task: Task, dtypes: list, layouts: list, planner: Planner,
               holder: tuple[Backend, object] | None, placement: Placement) -> list[str]:
    """For a block kept in device memory that is one index_select of a host array: a line saying
    whether its rows are read in place by a kernel (`touched.in_place`), gathered straight into
    device memory in pieces (`touched.streaming`) or the program below runs, with the prices
    (`touched.kept_ways`; the table priced as not yet imported, as its first compute sees it)."""
    if holder is None or not isinstance(holder[1], RowStreamer) or placement.input(0) is not None:
        return []
    if not streamable(task.recipe.chain, layouts):
        return []
    backend, streamer = holder
    table = math.prod(layouts[0].shape) * dtypes[0].itemsize
    try:
        ways = kept_ways(planner, task.recipe.chain, dtypes, layouts, backend, streamer,
                         table if isinstance(streamer, RowReader) else None)
    except NoBindingError:
        return []
    way = ways.pick()
    program = f"the program below on {ways.program.backend} ~{seconds(ways.program_s)}"
    prices = [ways.streamed.describe(backend)] + ([ways.read.describe(backend)] if ways.read else [])
    if way == "in-place":
        return [f"  result kept on {backend}: rows {prices[1]}, over {program} and the rows "
                f"{prices[0]}; no program runs"]
    if way == "streamed":
        rest = f" and the rows {prices[1]}" if ways.read else ""
        return [f"  result kept on {backend}: {prices[0]}, over {program}{rest}; no program runs"]
    rest = f", and the rows {prices[1]}" if ways.read else ""
    return [f"  result kept on {backend} by {program}, over the rows {prices[0]}{rest}"]


def _placement(task: Task, leaves: list[Node], result: Backend | None = None) -> Placement:
    """Where the representative block's program inputs are: a chunk read as it is from a source
    whose graph holds it in device memory (`persist(device=True)`) is there, the rest in host
    memory (what the block task sees, `backends.base.block_backend`); so is a select's source of
    one such chunk."""
    sources = {leaf.name: leaf for leaf in leaves if isinstance(leaf, Source)}
    where: list[Backend | None] = []
    for spec in task.recipe.inputs:
        found = None
        if isinstance(spec, Gathered) and len(spec.parts) == 1:
            spec_part = spec.parts[0]  # one source chunk is read as it is (`Gathered.arrays`)
        else:
            spec_part = spec
        if isinstance(spec_part, Part) and not spec_part.views:
            key = task.keys[spec_part.arg]
            source = sources.get(key[0]) if isinstance(key, tuple) else None
            if source is not None:
                found = block_backend(source.array.__dask_graph__().get(key))
        where += [found] + [None] * (len(spec.signature(task.metas)) - 1)
    return Placement.of(where, result)


def _staging(task: Task, dtypes: list, layouts: list, planner: Planner, program: Program,
             lines: list[str], placement: Placement) -> Program:
    """The program a block runs once each select source that may be staged as the rows its indices
    touch (`graph.touched`) is staged or not, as the planner prices them; a line for each such
    source says which and why."""
    position = 0
    for spec in task.recipe.inputs:
        here, position = position, position + len(spec.signature(task.metas))
        if not isinstance(spec, Gathered) or placement.input(here) is not None:
            continue  # a resident source is read in place, never staged (`touched.staged_where_cheaper`)
        shape = layouts[here].shape
        bound = row_bound(task.recipe.chain, here, spec.axis, layouts[here],
                          math.prod(layouts[here + 1].shape))
        if not bound:
            continue
        try:
            st = priced(planner, task.recipe.chain, dtypes, layouts, here, bound)
        except NoBindingError:
            continue
        staged = (f"staged, up to {bound} touched row(s) taken on the host (~{seconds(st.copy_s)}) "
                  f"then on {st.staged.backend} ~{seconds(st.staged.cost)}")
        as_is = f"as it is ({shape[spec.axis]} rows) on {st.as_is.backend} ~{seconds(st.as_is.cost)}"
        lines.append(f"  in{here}: {staged}, over {as_is}" if st.pays else
                     f"  in{here} read {as_is}, over {staged}")
        if st.pays:
            dtypes[here + 1] = st.staged.input_dtypes[here + 1]
            layouts[here] = st.staged.input_layouts[here]
            program = st.staged
    return program


def _forced(planner: Planner) -> str:
    """`LAZYFUEL_BACKEND=<name>` when that setting restricts the planner to one backend, else ''."""
    choice = config.backend
    return f"LAZYFUEL_BACKEND={choice}" if choice != "auto" and len(planner.backends) == 1 else ""


def _devices(backend: Backend, tasks: int) -> str:
    """Where the group's tasks run: one device, or several with the round-robin rule."""
    labels = devices(backend)
    if not labels:
        return f"  runs on the {backend.name} backend (one device: nothing to spread)"
    if len(labels) == 1:
        return f"  runs on {backend.name} device {labels[0]}"
    used = labels[:tasks]
    listed = ", ".join(f"#{i} {label}" for i, label in enumerate(used))
    return (f"  {tasks} task(s) spread over {len(used)} {backend.name} devices (task i on device "
            f"i mod {len(labels)}, or where most of its resident inputs' bytes lie; a task's chain stays "
            f"on its device): {listed}")


def recipe_shape(node: Node, block: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(c[b] for c, b in zip(node.chunks, block))


def _indices(spec: object) -> str:
    """How a select's index input is described: concrete ones were checked when built."""
    return "indices (checked when built)" if hasattr(spec, "value") else "indices (checked at compute)"


def _inputs(task: Task) -> list[str]:
    lines = []
    number = 0
    for spec in task.recipe.inputs:
        sigs = spec.signature(task.metas)
        if isinstance(spec, Gathered):
            what = [f"source from {len(spec.parts)} chunk(s) along axis {spec.axis}"
                    + _views(spec.parts[0]), _indices(spec.index)]
        elif isinstance(spec, Assembled):
            what = [f"source: {len(spec.pieces)} piece(s) concatenated along axis {spec.axis}",
                    "the order to take them in"]
        elif isinstance(spec, Part):
            what = ["chunk" + _views(spec)]
        else:
            what = [_indices(spec)]
        for text, (dtype, layout) in zip(what, sigs):
            awkward = [k for k, v in layout.properties().items() if v and k != "contiguous"]
            shape = "contiguous" if layout.is_contiguous else " + ".join(awkward) or "not contiguous"
            lines.append(f"    in{number}: {dtype}{list(layout.shape)} {shape} - {text}")
            number += 1
    return lines


def _views(part: Part) -> str:
    return f" viewed by {' . '.join(op for op, _ in part.views)}" if part.views else ""
