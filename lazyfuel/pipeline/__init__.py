"""Pipeline graphs (`graphs/*.yaml`): parse and validate (`spec`), build inputs (`inputs`) and
steps with the public API, run them and summarise the outputs (`run`, `outputs`).

    graph = load_graph("graphs/quickstart.yaml")      # GraphError names file, line and step
    built = build(graph)                              # lazy lazyfuel Arrays; nothing runs
    result = execute(built, scheduler="threads")      # computes, stores, checksums
"""

from lazyfuel.pipeline.document import GraphError
from lazyfuel.pipeline.ops import OPS, available_ops
from lazyfuel.pipeline.run import Built, RunResult, build, execute, explain
from lazyfuel.pipeline.spec import PipelineSpec, load_graph, parse_graph

__all__ = ["OPS", "Built", "GraphError", "PipelineSpec", "RunResult", "available_ops", "build",
           "execute", "explain", "load_graph", "parse_graph"]
