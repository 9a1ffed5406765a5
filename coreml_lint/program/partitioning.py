"""torch's ``CapabilityBasedPartitioner.propose_partitions`` in near-linear time.

``CoreMLPartitioner`` (executorch 1.5.1) calls it with ``allows_single_node_partition=True``
and horizontal fusion on. torch walks every fx node in reverse topological order (the
output node, the call nodes, then the placeholders). At a supported node it opens a
partition and lets it absorb, one after the other, every existing partition in order of
age (oldest first) whose union with it would not make a cycle. At any other node, the
oldest partition does the same with all the others. torch tests each pair by walking
every downstream node, so a program with hundreds of CPU islands costs it minutes.

We make the same decisions in the same order, with the cycle test answered from
reachability sets instead of walks. Contract every partition to one vertex: two
partitions can merge exactly when no path of two or more edges joins them. So we keep,
for every partition and every CPU node already visited, ``down``: the partitions it
reaches, as a bitset over partition *slots* (a slot is numbered by age, so the bit order
is torch's candidate order). A partition that is merged away leaves its slot behind as
an alias of the survivor; ``mask`` holds all the slots of a partition, so every test is
"any of its slots". Reachability only grows when partitions merge, and it grows for the
ancestors of the merged pair only, so we push the new bits up from there and stop at
any vertex that already has them. A pair found joined through a CPU node can never
merge again; ``blocked`` remembers such pairs so the oldest partition's repeated rounds
do not test them again.

``tests/test_partitioning.py`` checks this against a line-by-line transcription of
torch's code on thousands of random graphs, and against torch itself. (In every graph
we generated, a new partition absorbed at most one other and the oldest partition's
rounds merged nothing: any two live partitions stay joined through a third vertex. The
code does not rely on it; it makes every decision torch makes.)
"""

from __future__ import annotations

from collections.abc import Sequence


def propose_partitions(
    users: Sequence[Sequence[int]], supported: Sequence[bool], placeholders: int = 0
) -> list[list[int]]:
    """The partitions torch proposes, as sorted node indices, ordered by first node.

    ``users[i]`` are the nodes reading node ``i`` (all after ``i``: nodes are in
    topological order), ``supported[i]`` the operator-support decision, and
    ``placeholders`` the number of placeholder nodes before the first node (each is one
    more unsupported step at the end of torch's walk)."""
    return _Partitioner(users, supported).run(placeholders)


def _bits(value: int):
    """Positions of the set bits, lowest first."""
    while value:
        low = value & -value
        yield low.bit_length() - 1
        value ^= low


class _Partitioner:
    """State of one run. A partition is named by the node that opened it (``pid``);
    per-partition lists are indexed by that node, and ``down`` also holds, at a CPU
    node's index, what that node reaches."""

    def __init__(self, users: Sequence[Sequence[int]], supported: Sequence[bool]) -> None:
        n = len(users)
        self.users = users
        self.supported = supported
        self.preds: list[list[int]] = [[] for _ in range(n)]
        for i, out in enumerate(users):
            for s in out:
                self.preds[s].append(i)
        self.parent = list(range(n))
        self.slot = [-1] * n  # partition -> its slot (-1 while it is the fresh one)
        self.mask = [0] * n  # partition -> all slots merged into it
        self.down = [0] * n  # partition or CPU node -> slots of the partitions it reaches
        self.cpu_down = [0] * n  # partition -> what its CPU users reach
        self.direct = [0] * n  # partition -> slots of the partitions it feeds directly
        self.blocked = [0] * n  # partition -> slots joined to it through a CPU node
        self.vpreds: list[set[int] | None] = [None] * n  # visited nodes feeding it
        self.slot_pid: list[int] = []
        self.live = 0  # bitset of the slots of the live partitions
        self.step = n  # index of the node being visited
        self.dirty = False  # something changed since the oldest partition's last round

    def run(self, placeholders: int) -> list[list[int]]:
        for i in reversed(range(len(self.users))):
            self.step = i
            if self.supported[i]:
                self._visit_supported(i)
            else:
                self._visit_cpu(i)
        for _ in range(placeholders):
            if not self._oldest_round():
                break
        groups: dict[int, list[int]] = {}
        for i, ok in enumerate(self.supported):
            if ok:
                groups.setdefault(self._find(i), []).append(i)
        return list(groups.values())

    def _find(self, pid: int) -> int:
        parent = self.parent
        root = pid
        while parent[root] != root:
            root = parent[root]
        while parent[pid] != root:
            parent[pid], pid = root, parent[pid]
        return root

    def _reach(self, node: int) -> int:
        """What a path entering ``node`` reaches: its partition and beyond, or for a CPU
        node, the partitions beyond it."""
        if self.supported[node]:
            pid = self._find(node)
            return self.down[pid] | 1 << self.slot[pid]
        return self.down[node]

    def _visit_cpu(self, i: int) -> None:
        reach = 0
        for s in self.users[i]:
            reach |= self._reach(s)
            if self.supported[s]:
                self._vpreds(self._find(s)).add(i)
        self.down[i] = reach
        self._oldest_round()

    def _visit_supported(self, v: int) -> None:
        down = cpu_down = direct = beyond = 0
        for s in self.users[v]:
            if self.supported[s]:
                pid = self._find(s)
                bit = 1 << self.slot[pid]
                direct |= bit
                down |= self.down[pid] | bit
                beyond |= self.down[pid]
                self._vpreds(pid).add(v)
            else:
                cpu_down |= self.down[s]
        self.down[v] = down | cpu_down
        self.cpu_down[v] = cpu_down
        self.direct[v] = direct
        self.vpreds[v] = set()
        self.dirty = True
        cur = self._absorb(v, -1, beyond | cpu_down)
        if self.slot[cur] < 0:  # it absorbed nothing: a new, youngest partition
            slot = len(self.slot_pid)
            self.slot_pid.append(cur)
            self.slot[cur] = slot
            self.mask[cur] = 1 << slot
            self.live |= 1 << slot

    def _oldest_round(self) -> bool:
        """torch's round at an unsupported node: the oldest partition tries to absorb
        every other one. Returns whether anything merged."""
        live = self.live
        if not self.dirty or live & (live - 1) == 0:
            return False
        first = (live & -live).bit_length() - 1
        before = live.bit_count()
        self._absorb(self._find(self.slot_pid[first]), first)
        self.dirty = self.live.bit_count() != before
        return self.dirty

    def _absorb(self, cur: int, after: int, fence: int | None = None) -> int:
        """Let ``cur`` absorb, oldest first, every partition with a slot above ``after``
        that it can merge with; returns the partition ``cur`` became. ``fence`` is
        ``_long_down(cur)`` when the caller has it."""
        if fence is None:
            fence = self._long_down(cur)
        fence |= self.blocked[cur]
        while True:
            candidates = (self.live & ~fence) >> (after + 1)
            if not candidates:
                return cur
            after += (candidates & -candidates).bit_length()
            other = self._find(self.slot_pid[after])
            if fence & self.mask[other]:  # a merged-away slot of ``other`` is fenced
                continue
            if self.mask[cur] and self._reaches_long(other, cur):
                fence |= self.blocked[cur]
                continue
            cur = self._merge(cur, other)
            fence = self._long_down(cur) | self.blocked[cur]

    def _long_down(self, pid: int) -> int:
        """Slots of the partitions ``pid`` reaches through at least one other vertex."""
        fence = self.cpu_down[pid]
        seen = 0
        for slot in _bits(self.direct[pid]):
            other = self._find(self.slot_pid[slot])
            bit = 1 << self.slot[other]
            if other != pid and not seen & bit:
                seen |= bit
                fence |= self.down[other]
        return fence

    def _reaches_long(self, pid: int, target: int) -> bool:
        """Whether ``pid`` reaches ``target`` through another vertex. A path through a
        CPU node is permanent: remember it so that no later round tests the pair."""
        mask = self.mask[target]
        if self.cpu_down[pid] & mask:
            self.blocked[target] |= self.mask[pid]
            self.blocked[pid] |= mask
            return True
        for slot in _bits(self.direct[pid]):
            other = self._find(self.slot_pid[slot])
            if other != target and self.down[other] & mask:
                if self.blocked[target] & self.mask[other]:
                    self.blocked[target] |= self.mask[pid]
                    self.blocked[pid] |= mask
                return True
        return False

    def _merge(self, a: int, b: int) -> int:
        """Merge partition ``b`` (live, with a slot) and ``a``; the older slot survives."""
        if self.slot[a] < 0:
            return self._join_fresh(a, b)
        keep, gone = (a, b) if self.slot[a] < self.slot[b] else (b, a)
        before = [self.down[p] | 1 << self.slot[p] for p in (keep, gone)]
        self.parent[gone] = keep
        mask = self.mask[keep] = self.mask[keep] | self.mask[gone]
        self.down[keep] = (self.down[keep] | self.down[gone]) & ~mask
        self.cpu_down[keep] |= self.cpu_down[gone]
        self.direct[keep] = (self.direct[keep] | self.direct[gone]) & ~mask
        self.blocked[keep] |= self.blocked[gone]
        self.live &= ~(1 << self.slot[gone])
        preds, other = self._vpreds(keep), self._vpreds(gone)
        if len(preds) < len(other):
            preds, other = other, preds
        preds |= other
        self.vpreds[keep], self.vpreds[gone] = preds, None
        self.down[gone] = self.cpu_down[gone] = self.direct[gone] = self.blocked[gone] = 0
        reach = self.down[keep] | 1 << self.slot[keep]
        if any(reach & ~old for old in before):  # some ancestors reach less than this
            self._raise(keep, reach)
        self.dirty = True
        return keep

    def _join_fresh(self, v: int, pid: int) -> int:
        """The fresh partition ``{v}`` joins ``pid``: ``pid``'s slot stays, and since
        ``v`` has no visited ancestor, only ``pid``'s may reach more than before."""
        self.parent[v] = pid
        mask, old = self.mask[pid], self.down[pid]
        down = self.down[pid] = (old | self.down[v]) & ~mask
        self.cpu_down[pid] |= self.cpu_down[v]
        self.direct[pid] = (self.direct[pid] | self.direct[v]) & ~mask
        self.vpreds[v] = None
        self.down[v] = self.cpu_down[v] = self.direct[v] = 0  # only the survivor's are read
        if down & ~old:
            self._raise(pid, down | 1 << self.slot[pid])
        self.dirty = True
        return pid

    def _vpreds(self, pid: int) -> set[int]:
        preds = self.vpreds[pid]
        if preds is None:
            preds = self.vpreds[pid] = set()
        return preds

    def _raise(self, pid: int, reach: int) -> None:
        """Give every visited ancestor of ``pid`` the slots in ``reach``; stop at those
        that have them (their own ancestors have them too)."""
        stack = [pid]
        while stack:
            vertex = stack.pop()
            preds = self.vpreds[vertex] if self.supported[vertex] else self.preds[vertex]
            for p in list(preds):
                if p < self.step:
                    continue
                if not self.supported[p]:
                    if reach & ~self.down[p]:
                        self.down[p] |= reach
                        stack.append(p)
                    continue
                owner = self._find(p)
                if owner == vertex:
                    preds.discard(p)  # it joined this partition
                    continue
                if not self.supported[vertex]:
                    self.cpu_down[owner] |= reach
                if reach & ~self.down[owner]:
                    self.down[owner] |= reach
                    stack.append(owner)
