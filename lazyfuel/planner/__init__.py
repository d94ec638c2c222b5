"""The planner: bindings chosen per chunk signature, Contiguize inserted where caps demand it."""

from lazyfuel.planner.chain import Chain, OpNode
from lazyfuel.planner.choice import Candidate, Choice
from lazyfuel.planner.explain import describe_choices, describe_program
from lazyfuel.planner.plan import Planner
from lazyfuel.planner.program import Program, Step

__all__ = ["Candidate", "Chain", "Choice", "OpNode", "Planner", "Program", "Step", "describe_choices",
           "describe_program"]
