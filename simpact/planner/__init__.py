"""The SIMPACT planner: Algorithm 1 (sample, roll out, optimise, judge), its context and its records."""

from simpact.planner.records import Failure, PlanResult, Proposal

__all__ = ["Failure", "PlanResult", "Proposal"]
