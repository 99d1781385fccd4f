"""The hunt's plans, one run at a time: the covering plans, and mutations of the plans that gave a
behaviour not seen before (issue 43; Mallory, CCS 2023, steers Jepsen's nemesis so).

Three strategies, which benchmarks/findability.py compares:

  covering   the covering plans (harness/hunt/plan.py), each chosen greedily over the ordered
             pairs not yet covered by faults that landed (a pair whose faults did not land is
             tried again, twice at most), then seeded draws
  feedback   seeded draws, and mutations of the plans that gave a new behaviour
  both       the covering plans, with every MUTATION_EVERY-th run a mutation while a kept plan
             is left; once the pairs are covered, mutations, then draws

A plan is kept when its run gave a behaviour (harness/hunt/behaviour.py) not seen before; the
faults that gave it are the mutation's focus. The kept plan mutated next is the one whose new
behaviours' reactions (what Spark did, what the sink saw) are the rarest so far, each kept plan
MUTATIONS_PER_PLAN times at most. A mutation shifts a focus fault by one batch, changes its
point (the kind's covered key), adds a fault before or after it, or swaps it with another.
With covering, the mutation run is the one of those that covers most pairs not yet covered
(tier by tier, as the covering plans are chosen); alone, one drawn from the seed.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from faults.registry import KINDS
from harness.hunt.behaviour import NOTHING, REFUSED, Behaviour
from harness.hunt.plan import (
    DRAWS,
    GAP_S,
    MAX_FAULTS,
    MIN_SPAN_S,
    Choice,
    Pair,
    Space,
    accepted,
    choice_of,
    draw,
    fits,
    lasts_s,
    pairs_of,
    seconds,
    seconds_text,
    tier,
    timed_plan,
    triples,
)

COVERING, FEEDBACK, BOTH = "covering", "feedback", "both"
STRATEGIES = (COVERING, FEEDBACK, BOTH)
MUTATIONS_PER_PLAN = 3    # a kept plan is mutated this often at most
MOST_FAULTS = MAX_FAULTS + 1   # a mutation may add a fault to a plan of three
GIVE_UP_AFTER = 2         # a pair tried this often without both faults landing is no longer sought


Mutation = tuple[list[dict], str]   # a plan, and what changed


@dataclass
class Proposal:
    """The next run's plan, and where it came from."""

    plan: list[dict]
    source: str               # covering, mutation, drawn
    change: str = ""          # a mutation's: "run 3, kill-driver at after-write instead of before-write"
    parent: int | None = None


class Cover:
    """The greedy covering over the pairs still to cover: the same plans as plan.covering while
    every fault lands (its candidates and their order, the first best one taken)."""

    def __init__(self, space: Space, seed: int):
        order = list(space.choices)
        random.Random(f"cover:{seed}").shuffle(order)
        possible = sorted(space.possible, key=lambda p: (p[0].label, p[1].label))
        self.index = {p: i for i, p in enumerate(possible)}
        self.pairs = possible
        self.weight = np.array([(1_000_000, 1_000, 1)[tier(p)] for p in possible], dtype=np.int64)
        workload_s = space.workload_s
        self.candidates: list[tuple[Choice, ...]] = [t for t in triples(order) if fits(list(t), workload_s)]
        self.candidates += [(a, b) for a in order for b in order if fits([a, b], workload_s)]
        ids = np.full((len(self.candidates), 3), -1, dtype=np.int64)
        for row, cand in enumerate(self.candidates):
            found = sorted({self.index[p] for p in pairs_of(cand) if p in self.index})
            ids[row, :len(found)] = found
        self.ids = ids
        column = {c: k for k, c in enumerate(space.choices)}
        self.holds = np.zeros((len(self.candidates), len(space.choices)), dtype=bool)   # candidate x choice
        for row, cand in enumerate(self.candidates):
            self.holds[row, [column[c] for c in cand]] = True
        self.column = column
        self.left = np.ones(len(possible), dtype=bool)
        self.tries = np.zeros(len(possible), dtype=np.int64)
        self.given_up: list[Pair] = []

    def score(self, choices: list[Choice] | tuple[Choice, ...]) -> int:
        """The tier-weighted count of pairs still to cover that the choices hold."""
        found = {self.index[p] for p in pairs_of(choices) if p in self.index}
        return int(sum(self.weight[i] for i in found if self.left[i]))

    def best(self, holding: set[Choice] | None = None) -> tuple[Choice, ...] | None:
        """The candidate that covers most pairs still to cover, tier by tier (None: none left);
        with `holding`, the best of those that hold one of those choices."""
        if not self.left.any():
            return None
        gain = np.where(self.ids >= 0, (self.left * self.weight)[self.ids], 0).sum(axis=1)
        if holding:
            gain = np.where(self.holds[:, [self.column[c] for c in holding]].any(axis=1), gain, 0)
        row = int(np.argmax(gain))
        return self.candidates[row] if gain[row] > 0 else None

    def ran(self, choices: list[Choice], landed: list[bool],
            ended: frozenset[Choice] | set[Choice] = frozenset(), decided: bool = True) -> None:
        """A run of `choices` (in order): its pairs of faults that both landed are covered; a pair
        with a fault that did not land counts one try, and is given up after GIVE_UP_AFTER, or at
        once when its first fault is one after which Spark stopped the query (`ended`: no later
        fault of a run can land after it). A run whose verdict could not be decided (`decided`
        False: outcome undecided, UNKNOWN) covers nothing, its faults landed or not: it did not
        say whether the pair holds, so each of its pairs counts one try and is drawn again."""
        kept = [c for c, ok in zip(choices, landed, strict=True) if ok and decided]
        for p in pairs_of(kept):
            if p in self.index:
                self.left[self.index[p]] = False
        for p in pairs_of(choices) - pairs_of(kept):
            i = self.index.get(p)
            if i is not None and self.left[i]:
                self.tries[i] += GIVE_UP_AFTER if p[0] in ended else 1
                if self.tries[i] >= GIVE_UP_AFTER:
                    self.left[i] = False
                    self.given_up.append(p)

    def ends(self, first: Choice) -> None:
        """Spark stopped the query for good after `first` (it refused to go on): every pair
        from it is given up."""
        for p, i in self.index.items():
            if p[0] == first and self.left[i]:
                self.left[i] = False
                self.given_up.append(p)

    @property
    def covered(self) -> int:
        return int((~self.left).sum()) - len(self.given_up)


@dataclass
class Kept:
    """A plan whose run gave behaviours not seen before, and its mutations not yet run."""

    run: int
    plan: list[dict]
    new: set[Behaviour]
    focus: set[str]           # the choices of its faults that gave them, Spark doing something
    novel: set[str]           # ... of those that showed what Spark did as no run had shown it
    mutated: int = 0
    options: list[Mutation] | None = None   # computed when first asked for


@dataclass
class Planner:
    """The next plan of a hunt, from what its runs so far did (`tell`)."""

    space: Space
    seed: int
    strategy: str = BOTH
    batch_s: float = 1.0      # one batch's time: a shift moves a fault by this much
    seen: set[Behaviour] = field(default_factory=set)
    runs: int = 0
    kept: list[Kept] = field(default_factory=list)
    reactions: Counter = field(default_factory=Counter)   # (spark, sink) -> runs that showed it
    reached: set[str] = field(default_factory=set)    # the choices after which the sink saw something
    ran: set[Choice] = field(default_factory=set)     # every choice some run held
    ran_pairs: set[Pair] = field(default_factory=set)   # every ordered pair some run held
    dry: bool = False         # the last run showed no behaviour not seen before

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy {self.strategy!r} is none of {', '.join(STRATEGIES)}")
        self.cover = Cover(self.space, self.seed)
        self.covering_plans = 0   # covering plans handed out: each timed from its own index
        self.draws = 0

    # -- the next plan ----------------------------------------------------------------------------
    def next(self) -> Proposal:
        """The next run's plan. Covering alone: the next covering plan, then draws. Feedback alone:
        the best mutation while a kept plan is left, else a draw. Both: a mutation when it covers
        as many pairs still to cover as the next covering plan (tier by tier), or, once for a plan
        whose run showed Spark doing what no run had shown, when it puts a fault whose effect
        reached the sink after that; else the covering plan (after a run that showed nothing new,
        the best one holding a choice no run has held); once the pairs are covered, mutations,
        then draws."""
        best = self._covering() if self.strategy != FEEDBACK else None
        if self.strategy != COVERING:
            floor = self.cover.score(best) if best is not None else None
            mutation = self._mutation(floor)
            if mutation is not None:
                return mutation
        if best is not None:
            plan = timed_plan(self.space, self.seed, self.covering_plans, list(best))
            self.covering_plans += 1
            return Proposal(plan, "covering")
        self.draws += 1
        return Proposal(draw(self.space, self.seed, self.covering_plans + self.draws - 1), "drawn")

    def tell(self, proposal: Proposal, landed: list[bool], behaviours: set[Behaviour],
             decided: bool = True) -> set[Behaviour]:
        """What the run of `proposal` did: which of its faults (in the order of their `at`) landed,
        its behaviours, and whether its verdict was decided (an undecided run covers no pair:
        Cover.ran). Returns the behaviours not seen before."""
        self.runs += 1
        ordered = _by_time(proposal.plan)
        choices = [choice_of(t) for t in ordered]
        ended = {c for c in choices if c.label in {b.fault for b in behaviours if b.spark == REFUSED}}
        self.cover.ran(choices, landed, ended, decided)
        for c in ended:   # and no plan can put a fault that lands after it: none is drawn
            self.cover.ends(c)
        self.ran.update(choices)
        self.ran_pairs |= pairs_of(choices)
        new = behaviours - self.seen
        shown = {b.spark for b in self.seen}
        self.dry = not new
        self.seen |= behaviours
        self.reactions.update({(b.spark, b.sink) for b in behaviours})
        self.reached |= {b.fault for b in behaviours if b.sink != NOTHING}
        if new:
            # Spark doing nothing after a fault is no lead, nor its refusal (nothing lands after it)
            leads = {b.fault for b in new if b.spark not in (NOTHING, REFUSED)}
            novel = {b.fault for b in new if b.spark not in shown} & leads if self.runs > 1 else set()
            self.kept.append(Kept(self.runs, ordered, new, leads, novel))
        return new

    def _covering(self) -> tuple[Choice, ...] | None:
        """The next covering plan's choices: the best candidate; with feedback, after a run that
        showed nothing new, the best of those holding a choice no run has held (what never ran
        can only show new behaviours)."""
        if self.strategy == BOTH and self.dry:
            fresh = set(self.space.choices) - self.ran
            best = self.cover.best(fresh) if fresh else None
            if best is not None:
                return best
        return self.cover.best()

    # -- mutations ------------------------------------------------------------------------------
    def _pool(self) -> list[Kept]:
        return [k for k in self.kept if k.mutated < MUTATIONS_PER_PLAN]

    def _rarest(self) -> Kept | None:
        """The kept plan whose new behaviours' reactions are the rarest so far (the latest of equals)."""
        def rarity(k: Kept) -> tuple[int, int]:
            return (min(self.reactions[(b.spark, b.sink)] for b in k.new), -k.run)
        return min(self._pool(), key=rarity, default=None)

    def interest(self, plan: list[dict], parent: Kept, novel_only: bool = False) -> int:
        """The ordered pairs no run has held that the plan puts after a fault of the parent's new
        behaviours (its novel ones: Spark doing what no run had shown; with `novel_only`, those
        alone, else the others when it has none) another fault whose effect reached the sink: a
        new behaviour, then a batch id or rows seen again, is where a sink's exactly-once breaks."""
        anchors = parent.novel if novel_only else parent.novel or parent.focus
        choices = [choice_of(t) for t in plan]
        return sum(1 for a, b in pairs_of(choices) if a != b and a.label in anchors
                   and b.label in self.reached and (a, b) not in self.ran_pairs)

    def _mutation(self, floor: int | None) -> Proposal | None:
        """The rarest kept plan's best mutation: with covering (`floor`, the next covering plan's
        score), the one covering most pairs still to cover, then of most interest, taken only when
        it covers no fewer than the covering plan (or, once, for a plan that showed Spark doing
        something new, the one of most interest); alone, the one of most interest, then drawn."""
        while (parent := self._rarest()) is not None:
            rng = random.Random(f"mutate:{self.seed}:{parent.run}")
            if parent.options is None:
                parent.options = mutations(self.space, parent.plan, self.batch_s, rng)
            if not parent.options:
                parent.mutated = MUTATIONS_PER_PLAN
                continue
            # with covering, only Spark doing what no run had shown earns a run (a fault that only
            # re-ran a batch again, as most do, cost the Python-memory job's seeds runs)
            interest = [self.interest(p, parent, novel_only=floor is not None) for p, _ in parent.options]
            if floor is None:
                rank = [(k, rng.random()) for k in interest]
            else:
                rank = [(self.cover.score([choice_of(t) for t in p]), k)
                        for (p, _), k in zip(parent.options, interest, strict=True)]
            pick = max(range(len(rank)), key=rank.__getitem__)
            if floor is not None and (rank[pick][0] < floor or interest[pick] == 0):
                if not (parent.novel and parent.mutated == 0) or max(interest) == 0:
                    return None
                pick = max(range(len(rank)), key=lambda k: (interest[k], rank[k][0]))
            plan, change = parent.options.pop(pick)
            parent.mutated += 1
            return Proposal(plan, "mutation", f"run {parent.run}, {change}", parent.run)
        return None


def mutations(space: Space, plan: list[dict], batch_s: float, rng: random.Random) -> list[Mutation]:
    """Every mutation of `plan` that the loader accepts and the workload holds, with what it
    changed: each fault shifted one batch earlier and later, at each other value of its covered
    key, each choice added before or after it, each two faults swapped."""
    out: list[Mutation] = []
    for i, table in enumerate(plan):
        name = _label(table)

        def instead(changed: dict, change: str) -> None:
            out.append((plan[:i] + [changed] + plan[i + 1:], change))   # noqa: B023 - called at once

        for step in (-batch_s, batch_s):
            moved = {**table, "at": seconds_text(round(max(1.0, seconds(table["at"]) + step), 1))}
            if moved["at"] != table["at"]:
                instead(moved, f"{name} at {moved['at']} instead of {table['at']}")
        key = KINDS[table["kind"]].covered()
        for value in key.cover if key is not None else ():
            if key is not None and value != table.get(key.name):
                changed = {k: v for k, v in table.items() if k != key.name}
                if value is not None:
                    changed[key.name] = value
                instead(changed, f"{choice_of(changed).label} instead of {name}")
        for c in space.choices if len(plan) < MOST_FAULTS else ():
            added = _table(space, c, rng)
            if added is not None:
                out.append((plan[:i] + [added] + plan[i:], f"{c.label} added before {name}"))
                out.append((plan[:i + 1] + [added] + plan[i + 1:], f"{c.label} added after {name}"))
        for j in range(i + 1, len(plan)):
            swapped = list(plan)
            swapped[i], swapped[j] = {**plan[j], "at": table["at"]}, {**table, "at": plan[j]["at"]}
            out.append((swapped, f"{name} and {_label(plan[j])} swapped"))
    kept = []
    seen = {_key(plan)}
    for mutated, change in out:
        timed = _retimed(space, mutated)
        if timed is not None and _key(timed) not in seen:
            seen.add(_key(timed))
            kept.append((timed, change))
    return kept


def _table(space: Space, c: Choice, rng: random.Random) -> dict | None:
    """A fault table of choice `c` at 1 s (placed by _retimed), its keys drawn as the kind draws them."""
    kind = KINDS[c.kind]
    for _ in range(DRAWS):
        table = kind.draw(rng, 1.0, MIN_SPAN_S, asked=True)
        if c.key is not None:
            table.pop(c.key, None)
            if c.value is not None:
                table[c.key] = c.value
        if accepted(table, space):
            return table
    return None


def _retimed(space: Space, plan: list[dict]) -> list[dict] | None:
    """The plan in its order, each fault moved later where it would start before the one before
    it is over (its span and the shortest gap of plan.GAP_S: as the tightest plans, no room for a
    restart, which the run's workload waits for); None when it no longer fits or the loader
    refuses a fault."""
    out: list[dict] = []
    free = 1.0
    for table in plan:
        at = max(seconds(table["at"]), free)
        moved = {**table, "at": seconds_text(round(at, 1))}
        if not accepted(moved, space):
            return None
        out.append(moved)
        free = at + lasts_s(table) + GAP_S[0]
    return out


def _by_time(plan: list[dict]) -> list[dict]:
    """The plan in the order the loader runs it: by `at` (stable)."""
    return sorted(plan, key=lambda t: seconds(t["at"]))


def _label(table: dict) -> str:
    return choice_of(table).label


def _key(plan: list[dict]) -> str:
    import json

    return json.dumps(plan, sort_keys=True)
