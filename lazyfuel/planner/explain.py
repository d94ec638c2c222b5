"""Human-readable plans: which binding each step uses, which Contiguize steps were inserted and why."""

from __future__ import annotations

from lazyfuel.planner.program import Program


def describe_program(program: Program, indent: str = "  ") -> str:
    """One line per step: binding key, symbol, estimated cost, and the reason for inserted steps."""
    def name(v: int) -> str:
        return f"in{v}" if v < program.n_inputs else f"s{v - program.n_inputs}"

    lines = [f"{indent}program on {program.backend}: {len(program.steps)} step(s), "
             f"estimated {_seconds(program.cost)}"]
    for i, step in enumerate(program.steps):
        args = ", ".join(name(a) for a in step.args)
        line = (f"{indent}  s{i} = {step.binding.op_kind}({args}) via {step.binding.key} "
                f"[{step.binding.symbol}] -> {step.out_dtype}{list(step.out_shape)} "
                f"~{_seconds(step.cost)}")
        if step.reason:
            line += f"  (inserted: {step.reason})"
        lines.append(line)
    lines.append(f"{indent}  returns {', '.join(name(v) for v in program.outputs)}")
    return "\n".join(lines)


def _seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"
