"""A Spark tree (a plan's nodes, an expression's children) as a flat list, through py4j:
what the plan readers walk (job.plan_facts, determinism.py, event_time.py)."""

from __future__ import annotations


def walk(tree) -> list:
    """`tree` and every node below it (a TreeNode's `children()`, a Scala Seq), depth first."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return out
