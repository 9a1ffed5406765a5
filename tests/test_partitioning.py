"""Placement partitions are the ones torch's CapabilityBasedPartitioner proposes.

``coreml_lint.program.partitioning`` makes torch's greedy decisions from reachability
sets. The reference here, ``torch_transcription``, is torch 2.13's ``propose_partitions``
transcribed line by line onto node indices (its quadratic ``_DependencyViewer`` and
``partition_map`` included); it is checked against torch itself on fx graphs, and the fast
algorithm against both on random graphs of many shapes. (The bitset algorithm placement
used before was not a faithful reference: it never let a new partition absorb the others
first and skipped torch's rounds at unsupported nodes; ``uint8-made-on-cpu`` below is a
program where the real partitioner disagreed with it.)

A larger sweep runs from the command line:

    PYTHONPATH=$PWD .venv/bin/python tests/test_partitioning.py --graphs 100000 --nodes 120
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from collections.abc import Callable

import pytest

from coreml_lint.program.partitioning import propose_partitions

# A graph: users[i] lists the nodes reading node i (all after i), supported[i] is the
# operator-support decision, placeholders the number of placeholder nodes before them.
Dag = tuple[list[list[int]], list[bool], int]


def torch_transcription(users: list[list[int]], supported: list[bool], placeholders: int):
    """torch/fx/passes/infra/partitioner.py ``propose_partitions`` (torch 2.13) on indices:
    fx node ``k`` is a placeholder for ``k < placeholders``, then the nodes, then the output
    node, which reads every node nothing else reads. No getitem nodes, so the getitem pass
    has nothing to do; ``allows_single_node_partition=True`` as executorch passes it."""
    return _Transcription(users, supported, placeholders).propose()


class _Transcription:
    """torch's local variables and closures, as attributes and methods of the same names."""

    def __init__(self, users: list[list[int]], supported: list[bool], placeholders: int):
        n = len(users)
        self.placeholders = placeholders
        self.total = placeholders + n + 1
        self.fx_users: list[list[int]] = [[] for _ in range(self.total)]
        for i, out in enumerate(users):
            self.fx_users[placeholders + i] = [placeholders + u for u in out] or [self.total - 1]
        self.fx_supported = [False] * placeholders + list(supported) + [False]
        self.downstreams: list[set[int]] = [set() for _ in range(self.total)]  # DependencyViewer
        for node in reversed(range(self.total)):
            for user in self.fx_users[node]:
                self.downstreams[node].add(user)
                self.downstreams[node].update(self.downstreams[user])
        self.partition_map: dict[int, set[int]] = {}
        self.assignment: dict[int, int] = {}
        self.partitions: dict[int, dict[int, None]] = {}
        self.partitions_order: dict[int, int] = {}
        self.partition_users: dict[int, set[int]] = {}
        self.new_partition_id = itertools.count()

    def downstream_partitions(self, user_nodes, source_ids) -> set[int]:
        found: set[int] = set()
        for user in user_nodes:
            for path_node in itertools.chain((user,), self.downstreams[user]):
                target = self.assignment.get(path_node)
                if target is None:
                    continue
                found.add(target)
                found.update(self.partition_map[target])
        return found - set(source_ids)

    def dfs_iter_find_cycle(self, self_id: int, other_id: int, all_user_nodes) -> bool:
        self_nodes, other_nodes = self.partitions[self_id], self.partitions[other_id]
        for user in all_user_nodes:
            for path_node in itertools.chain((user,), self.downstreams[user]):
                if path_node in self_nodes or path_node in other_nodes:
                    return True
                if path_node in self.assignment:
                    p_map = self.partition_map[self.assignment[path_node]]
                    if self_id in p_map or other_id in p_map:
                        return True
        return False

    def maybe_merge_partition(self, self_id: int, other_id: int) -> int:
        self_nodes, other_nodes = self.partitions[self_id], self.partitions[other_id]
        all_user_nodes = self.partition_users[self_id] | self.partition_users[other_id]
        all_user_nodes.difference_update(other_nodes, self_nodes)
        if self.dfs_iter_find_cycle(self_id, other_id, all_user_nodes):
            return self_id
        merge_id, removed_id = self_id, other_id
        if len(self_nodes) < len(other_nodes):
            merge_id, removed_id = removed_id, merge_id
        self.partitions[merge_id].update(self.partitions[removed_id])
        for node in self.partitions.pop(removed_id):
            self.assignment[node] = merge_id
        order = self.partitions_order
        order[merge_id] = min(order[merge_id], order.pop(removed_id))
        p_map = self.partition_map
        p_map[merge_id] = p_map[merge_id] | p_map.pop(removed_id)
        self.partition_users[merge_id] = all_user_nodes
        del self.partition_users[removed_id]
        p_map[merge_id].update(self.downstream_partitions(all_user_nodes, (merge_id, removed_id)))
        p_map[merge_id].discard(merge_id)
        p_map[merge_id].discard(removed_id)
        return merge_id

    def propose(self) -> list[list[int]]:
        for node in reversed(range(self.total)):
            merge_candidates: dict[int, None] = {}
            if self.fx_supported[node]:
                pid = next(self.new_partition_id)
                self.partitions_order[pid] = pid
                self.assignment[node] = pid
                self.partitions[pid] = {node: None}
                self.partition_users[pid] = set(self.fx_users[node])
                self.partition_map[pid] = self.downstream_partitions(self.fx_users[node], (pid,))
                merge_candidates[pid] = None
            for pid, _ in sorted(self.partitions_order.items(), key=lambda item: item[1]):
                merge_candidates[pid] = None
            candidates = list(merge_candidates)
            if len(candidates) > 1:
                self_id = candidates[0]
                for other_id in candidates[1:]:
                    self_id = self.maybe_merge_partition(self_id, other_id)
        found = [sorted(k - self.placeholders for k in p) for p in self.partitions.values()]
        return sorted(found)


def fast(users: list[list[int]], supported: list[bool], placeholders: int) -> list[list[int]]:
    result = propose_partitions(users, supported, placeholders)
    assert result == sorted(result), "partitions are numbered by their first node"
    assert all(part == sorted(part) for part in result)
    return result


# --- graph shapes -------------------------------------------------------------------------


def _finish(rng: random.Random, preds: list[set[int]], ratio: float | None = None) -> Dag:
    n = len(preds)
    users: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(preds):
        for p in sorted(ps):
            users[p].append(i)
    ratio = rng.choice([0.0, 0.2, 0.5, 0.7, 0.85, 0.95, 1.0]) if ratio is None else ratio
    supported = [rng.random() < ratio for _ in range(n)]
    return users, supported, rng.randint(0, 4)


def random_local(rng: random.Random, n: int) -> Dag:
    """Mostly short edges, some long ones: what traced programs look like."""
    density = rng.choice([1.0, 1.5, 2.0, 3.0, 5.0])
    preds: list[set[int]] = []
    for i in range(n):
        ps: set[int] = set()
        for _ in range(int(rng.expovariate(1 / density)) + 1 if i else 0):
            if rng.random() < 0.6:
                ps.add(i - 1 - min(i - 1, int(rng.expovariate(1 / 3))))
            else:
                ps.add(rng.randrange(i))
        preds.append(ps)
    return _finish(rng, preds)


def layered(rng: random.Random, n: int) -> Dag:
    """Layers of a random width, each node reading one to three nodes a layer or two up."""
    width = rng.randint(2, 6)
    preds: list[set[int]] = []
    for i in range(n):
        lower = max(0, (i // width - 2) * width)
        upper = (i // width) * width
        ps = {rng.randrange(lower, upper) for _ in range(rng.randint(1, 3))} if upper else set()
        preds.append(ps)
    return _finish(rng, preds)


def chain(rng: random.Random, n: int) -> Dag:
    """A long chain with a few skip edges (residual-like)."""
    preds = [({i - 1} if i else set()) for i in range(n)]
    for _ in range(rng.randint(0, n // 4)):
        j = rng.randrange(1, n) if n > 1 else 0
        if j > 1:
            preds[j].add(rng.randrange(max(0, j - 6), j - 1))
    return _finish(rng, preds, rng.choice([0.6, 0.8, 0.9, 0.95]))


def diamonds(rng: random.Random, n: int) -> Dag:
    """Fork-join diamonds in sequence, branches of uneven length."""
    preds: list[set[int]] = [set()]
    while len(preds) < n:
        fork = len(preds) - 1
        ends = []
        for _ in range(rng.randint(2, 4)):
            last = fork
            for _ in range(rng.randint(1, 3)):
                preds.append({last})
                last = len(preds) - 1
            ends.append(last)
        preds.append(set(ends))
    return _finish(rng, preds[:n] if n else [])


def fan(rng: random.Random, n: int) -> Dag:
    """Wide fan-out from hubs and fan-in to sinks, with cross edges between branches."""
    preds: list[set[int]] = [set()]
    hubs = [0]
    while len(preds) < n:
        hub = rng.choice(hubs)
        branch = [len(preds) + k for k in range(rng.randint(3, 12))]
        for j in range(len(branch)):
            cross = {rng.choice(branch[:j])} if j and rng.random() < 0.3 else set()
            preds.append({hub} | cross)
        preds.append(set(rng.sample(branch, rng.randint(1, len(branch)))))
        hubs.append(len(preds) - 1)
    preds = [{p for p in ps if p < i} for i, ps in enumerate(preds[:n])]
    return _finish(rng, preds)


def blocks(rng: random.Random, n: int) -> Dag:
    """Transformer-like blocks on a residual stream, each maybe with a CPU-only op whose
    result is added back (the issue's ``split`` shape), plus cross-block edges."""
    preds: list[set[int]] = [set()]
    cpu: set[int] = set()
    stream = 0
    while len(preds) < n:
        start = len(preds)
        for k in range(rng.randint(2, 6)):
            preds.append({start + k - 1 if k else stream})
        preds.append({stream, len(preds) - 1})  # residual add
        stream = len(preds) - 1
        if rng.random() < 0.7:
            preds.append({stream})
            cpu.add(len(preds) - 1)
            preds.append({stream, len(preds) - 1})
            stream = len(preds) - 1
        if rng.random() < 0.2 and stream > 3:
            preds[stream].add(rng.randrange(stream - 1))
    preds = preds[:n]
    users, supported, placeholders = _finish(rng, preds, rng.choice([0.9, 1.0]))
    supported = [ok and i not in cpu for i, ok in enumerate(supported)]
    return users, supported, placeholders


def branches(rng: random.Random, n: int) -> Dag:
    """Independent branches, each cut by CPU nodes, with a few cross edges: horizontal
    fusion and the order of the greedy merges decide everything here."""
    count = rng.randint(2, 6)
    preds: list[set[int]] = []
    tails = [-1] * count
    for i in range(n):
        b = rng.randrange(count)
        ps = {tails[b]} if tails[b] >= 0 else set()
        if rng.random() < 0.15 and i:
            ps.add(rng.randrange(i))
        preds.append(ps)
        tails[b] = i
    return _finish(rng, preds, rng.choice([0.5, 0.7, 0.85]))


SHAPES: dict[str, Callable[[random.Random, int], Dag]] = {
    "random": random_local,
    "layered": layered,
    "chain": chain,
    "diamonds": diamonds,
    "fan": fan,
    "blocks": blocks,
    "branches": branches,
}


def generated(count: int, max_nodes: int, seed: int = 0):
    for k in range(count):
        shape = list(SHAPES)[k % len(SHAPES)]
        rng = random.Random(f"{seed}-{k}")
        n = rng.randint(1, max_nodes)
        yield shape, k, SHAPES[shape](rng, n)


# --- tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", list(SHAPES))
def test_matches_torch_transcription_on_random_graphs(shape):
    """500 graphs of each shape (3,500 in all), up to 40 nodes."""
    for k in range(500):
        rng = random.Random(f"{shape}-{k}")
        dag = SHAPES[shape](rng, rng.randint(1, 40))
        assert fast(*dag) == torch_transcription(*dag), (shape, k, dag)


def test_matches_torch_transcription_on_larger_graphs():
    """28 graphs of 100-300 nodes (4 of each shape), where many partitions live at once."""
    for k in range(28):
        shape = list(SHAPES)[k % len(SHAPES)]
        rng = random.Random(f"large-{k}")
        dag = SHAPES[shape](rng, rng.randint(100, 300))
        assert fast(*dag) == torch_transcription(*dag), (shape, k)


def test_a_cpu_node_between_two_supported_nodes_keeps_them_apart():
    # mul -> clamp -> to(uint8) [cpu] -> permute -> to [cpu]: the uint8-made-on-cpu case,
    # which the stock partitioner cuts into {mul, clamp} and {permute}
    users = [[1], [2], [3], [4], []]
    assert fast(users, [True, True, False, True, False], 1) == [[0, 1], [3]]
    # a supported node whose other user is a CPU node feeding the same partition
    users = [[1, 2, 3], [2, 3], [3], []]
    assert fast(users, [True, True, False, True], 1) == [[0, 1], [3]]


def test_empty_and_unsupported_graphs():
    assert fast([], [], 0) == []
    assert fast([[1], []], [False, False], 2) == []
    assert fast([[], []], [True, True], 0) == [[0, 1]]  # horizontal fusion


def test_issue_benchmark_shape_is_one_partition_per_island():
    """The ``split`` benchmark: each block's CPU op cuts the stream once."""
    preds: list[set[int]] = [set()]
    cpu = set()
    for _ in range(200):
        base = len(preds) - 1
        preds += [{base}, {base + 1}, {base, base + 2}]  # two ops and a residual add
        preds.append({base + 3})  # argmax (CPU)
        cpu.add(len(preds) - 1)
        preds.append({base + 3, base + 4})  # added back
    users, _, _ = _finish(random.Random(0), preds, 1.0)
    supported = [i not in cpu for i in range(len(preds))]
    result = fast(users, supported, 5)
    assert len(result) == 201
    assert all(part == list(range(part[0], part[-1] + 1)) for part in result)


# --- torch itself as the oracle -------------------------------------------------------------


def _fx_partitions(dag: Dag) -> list[list[int]]:
    import torch
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    users, supported, placeholders = dag
    graph = torch.fx.Graph()
    inputs = [graph.placeholder(f"p{k}") for k in range(placeholders)]
    preds: list[list[int]] = [[] for _ in users]
    for i, out in enumerate(users):
        for u in out:
            preds[u].append(i)
    nodes = []
    for i, ps in enumerate(preds):
        args = tuple(nodes[p] for p in ps) + ((inputs[i % placeholders],) if inputs else ())
        nodes.append(graph.call_function(torch.add, args, name=f"n{i}"))
    graph.output(tuple(nodes[i] for i, out in enumerate(users) if not out))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    wanted = {f"n{i}" for i, ok in enumerate(supported) if ok}

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node) -> bool:
            return node.op == "call_function" and node.name in wanted

    proposed = CapabilityBasedPartitioner(
        module, Support(), allows_single_node_partition=True
    ).propose_partitions()
    return sorted(sorted(int(node.name[1:]) for node in p.nodes) for p in proposed)


def test_matches_torch_capability_based_partitioner():
    """torch's own partitioner on 350 fx graphs (50 of each shape, up to 60 nodes)."""
    pytest.importorskip("torch")
    for shape, k, dag in generated(350, 60, seed=3):
        assert fast(*dag) == _fx_partitions(dag), (shape, k)


# --- every oracle case -----------------------------------------------------------------------


def _oracle_case_ids():
    from cases import CASE_IDS

    return CASE_IDS


@pytest.mark.parametrize("case_id", _oracle_case_ids())
def test_oracle_case_partitions_match_transcription(case_id, export_case, case_settings):
    """Placement's partitions for every oracle program: members, order and numbering."""
    from coreml_lint import lint_program
    from coreml_lint.core.config import LintConfig

    report = lint_program(export_case(case_id), LintConfig(partitioner=case_settings(case_id)))
    placement = report.placement
    nodes = placement.graph.nodes
    index = {node.name: i for i, node in enumerate(nodes)}
    producer = {out: i for i, node in enumerate(nodes) for out in node.outputs}
    users: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        for p in sorted({producer[v] for v in node.tensor_inputs() if v in producer}):
            users[p].append(i)
    supported = [placement.on_coreml(node) for node in nodes]
    expected = torch_transcription(users, supported, len(placement.graph.inputs))
    got = [[index[node.name] for node in part.nodes] for part in placement.partitions]
    assert got == expected
    for pid, part in enumerate(placement.partitions):
        assert part.id == pid
        assert all(placement.partition_of(node) is part for node in part.nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description="a larger random sweep against torch")
    parser.add_argument("--graphs", type=int, default=20_000)
    parser.add_argument("--nodes", type=int, default=80, help="largest graph")
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--fx", type=int, default=0, help="also this many torch fx graphs")
    args = parser.parse_args()
    start, checked = time.perf_counter(), 0
    for shape, k, dag in generated(args.graphs, args.nodes, args.seed):
        assert fast(*dag) == torch_transcription(*dag), (shape, k, args.seed)
        checked += 1
    for shape, k, dag in generated(args.fx, args.nodes, args.seed + 1):
        assert fast(*dag) == _fx_partitions(dag), (shape, k, args.seed + 1)
        checked += 1
    print(f"{checked} graphs agree ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
