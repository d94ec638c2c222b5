"""Human-readable plans: which binding each step uses, which Contiguize steps were inserted and why,
and the candidate plans the planner priced for each decision, with the winner and the reason."""

from __future__ import annotations

import math

from lazyfuel.planner.choice import Choice
from lazyfuel.planner.program import Program


def describe_program(program: Program, indent: str = "  ") -> str:
    """One line per step: binding key, symbol, estimated cost, where the binding came from
    (`default`: a shipped document, else the loaded document's path), and the reason for
    inserted steps."""
    def name(v: int) -> str:
        return f"in{v}" if v < program.n_inputs else f"s{v - program.n_inputs}"

    lines = [f"{indent}program on {program.backend}: {len(program.steps)} step(s), "
             f"estimated {seconds(program.cost)}"]
    if program.steps:
        costs = (f"transfers ~{seconds(program.transfer_cost)}, steps ~{seconds(program.steps_cost)}; "
                 if program.transfer_cost else "")
        lines.append(f"{indent}  {costs}{describe_links(program)}")
    for i, step in enumerate(program.steps):
        args = ", ".join(name(a) for a in step.args)
        line = (f"{indent}  s{i} = {step.binding.op_kind}({args}) via {step.binding.key} "
                f"[{step.binding.symbol}] -> {step.out_dtype}{list(step.out_shape)} "
                f"~{seconds(step.cost)} from {step.binding.origin or 'an unnamed document'}")
        if step.reason:
            line += f"  (inserted: {step.reason})"
        lines.append(line)
    lines.append(f"{indent}  returns {', '.join(name(v) for v in program.outputs)}")
    return "\n".join(lines)


def describe_choices(program: Program, indent: str = "  ", forced: str = "") -> str:
    """The planner's decisions for `program`: per decision, each candidate with its estimated cost
    and the cost's source (measured / prior), the winner marked and why it won. `forced` names
    what forced the backend (e.g. `LAZYFUEL_BACKEND=vulkan`), shown when only one was allowed."""
    lines = [f"{indent}costs compared ({len(program.choices)} decision(s); * = chosen):"]
    for choice in program.choices:
        lines.extend(_choice(choice, indent + "  ", forced if choice.what == "backend" else ""))
    return "\n".join(lines)


def _choice(choice: Choice, indent: str, forced: str) -> list[str]:
    why = choice.why
    if forced and len(choice.candidates) == 1:
        why = f"forced backend ({forced})"
    lines = [f"{indent}{choice.what}: {why}"]
    for i, c in enumerate(choice.candidates):
        mark = "*" if i == choice.chosen else "-"
        cost = f"~{seconds(c.cost)} ({c.source})" if not math.isnan(c.cost) else f"cannot run: {c.note}"
        split = (f" [steps ~{seconds(c.cost - c.transfer)} + transfers ~{seconds(c.transfer)}]"
                 if c.transfer and not math.isnan(c.cost) else "")
        lines.append(f"{indent}  {mark} {cost}  {c.plan}{split}")
    return lines


def describe_links(program: Program) -> str:
    """The bytes `program` moves over each device link, up (host to device) and down, and where
    its steps run: what `explain` prints per program."""
    where = f"steps run on {program.backend.name}"
    if not program.links:
        return f"bytes per link: none ({where}, in host memory)"
    parts = [f"{b.name} up {_bytes(sum(up))} ({len(up)} array(s)), down {_bytes(sum(down))} "
             f"({len(down)} array(s))" for b, up, down in program.links]
    return f"bytes per link: {'; '.join(parts)} ({where})"


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def seconds(s: float) -> str:
    """`s` seconds in µs, ms or s, for a reader."""
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"
