"""Hard spend caps (docs/methods.md, "Spend caps").

A ``Budget`` is one cap in US dollars and a ledger of what was spent and what calls in
flight have reserved. Every model call goes through ``ModelClient``, which asks the budget
for the call's worst case before it starts (:func:`worst_case`); a reservation that could
take spent + reserved past the cap is refused, so no call starts that could overshoot,
however many are in flight. When the call ends its reservation is settled at its real cost.
Calls worth something only together (a judge's passes and votes) reserve as one (:func:`together`).

Two ledgers: :class:`MemoryLedger` for one invocation (run, compare, grade), and the
store's (``council.storage.StoreLedger``) for a batch, whose cap and spending are kept with
the batch and shared by every process using the store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from council._util.money import usd
from council.accounting import observers
from council.errors import BudgetReached, UsageError

# BudgetReached is defined in council.errors (every caller can meet it); it stays importable from here.

#: Tokens a chat message costs beyond its text (role, separators), counted generously.
MESSAGE_OVERHEAD_TOKENS = 8
REQUEST_OVERHEAD_TOKENS = 16


def check_cap(value: Any, where: str = "--max-cost") -> float:
    """A cap in dollars: a finite number above 0 (``UsageError`` otherwise)."""
    try:
        cap = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{where} must be an amount in US dollars, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(cap) or cap <= 0:
        raise UsageError(f"{where} must be a finite amount of US dollars above 0, got {value!r}")
    return cap


def cap_in_force(given: Any, loaded: Any) -> float | None:
    """The spend cap in force (docs/methods.md, "Spend caps"): ``given`` (``--max-cost``, or the
    API's ``max_cost``; checked), else the config's ``[budget] max_cost_usd``, else none. Every
    front-end resolves its cap here: run, compare, grade, batch, worker, the server, the MCP
    tools and ``council.api.Council``."""
    if given is not None:
        return check_cap(given)
    return loaded.config.budget.max_cost_usd  # type: ignore[no-any-return]


def prompt_tokens_bound(messages: Iterable[dict[str, Any]], schema: dict[str, Any] | None = None) -> int:
    """An upper bound of a request's prompt tokens without its tokenizer: one token per UTF-8
    byte (a byte-level BPE token covers at least one byte), plus each message's overhead and
    the response schema, which providers count as prompt."""
    total = REQUEST_OVERHEAD_TOKENS
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        for value in message.values():
            if isinstance(value, str):
                total += len(value.encode("utf-8"))
    if schema is not None:
        total += len(json.dumps(schema).encode("utf-8"))
    return total


class Ledger(Protocol):
    """Where a cap's spending is kept; ``reserve`` is atomic against every other user."""

    def reserve(self, amount: float) -> tuple[Any, float, float]:
        """Reserve ``amount`` if spent + reserved + amount stays within the cap: (a token, or
        None when refused; spent; cap)."""

    def settle(self, token: Any, actual: float) -> None:
        """The reservation ``token`` is over: ``actual`` was spent."""

    def totals(self) -> tuple[float, float]:
        """(spent, cap)."""


@dataclass
class MemoryLedger:
    """One invocation's ledger (an event loop's calls reserve one after another)."""

    cap: float
    spent: float = 0.0
    reserved: dict[int, float] = field(default_factory=dict)
    _next: int = 0

    def reserve(self, amount: float) -> tuple[Any, float, float]:
        if self.spent + sum(self.reserved.values()) + amount > self.cap:
            return None, self.spent, self.cap
        self._next += 1
        self.reserved[self._next] = amount
        return self._next, self.spent, self.cap

    def settle(self, token: Any, actual: float) -> None:
        self.reserved.pop(token, None)
        self.spent += actual

    def shrink(self, token: Any, amount: float) -> None:
        if token in self.reserved:
            self.reserved[token] = min(self.reserved[token], amount)

    def totals(self) -> tuple[float, float]:
        return self.spent, self.cap


#: How many reservations like the one asked a :class:`Tranches` ledger reserves at once.
TRANCHE_SIZE = 16


@dataclass(eq=False)
class _Tranche:
    """One reservation in the ledger below, drawn on by several of the budget's reservations."""

    token: Any
    held: float  # what the ledger holds for it
    left: float  # of that, not drawn yet
    spent: float = 0.0  # what the draws settled so far spent
    drawn: float = 0.0  # what the draws in flight reserved
    in_flight: int = 0


@dataclass(frozen=True)
class _Draw:
    tranche: _Tranche
    amount: float


class Tranches:
    """A ledger that reserves in ``ledger`` (a batch's, in the store) for ``size`` reservations
    like the one asked at once, and lets the next ones draw on it (docs/methods.md, "Spend caps").

    In a store each reservation and settlement is a transaction, and PostgreSQL's are round
    trips: reserving per vote, a PostgreSQL batch under a cap ran far slower than without one
    (``benchmarks/bench_bare_client.py``). A tranche is
    settled at what its draws spent once none of them is in flight (with the room nobody drew
    back with it), so a process never holds room when it is idle. Near the cap, where a whole
    tranche does not fit, the room this process holds and no longer needs is given back
    (``shrink``), and from then on each reservation is made as asked: in one process no call is
    refused that a call-by-call ledger would have let start. A process that dies holding a
    tranche has it counted as spent, as any reservation of a dead process."""

    def __init__(self, ledger: Ledger, size: int = TRANCHE_SIZE) -> None:
        self.ledger = ledger
        self.size = size
        self.current: _Tranche | None = None
        self.live: list[_Tranche] = []  # reserved and not yet settled
        self.last: tuple[float, float] = (0.0, 0.0)  # (spent, cap) as the ledger last said
        self.near_cap = False  # a whole tranche was refused once: reserve as asked

    def reserve(self, amount: float) -> tuple[Any, float, float]:
        tranche = self.current
        if tranche is None or amount > tranche.left * (1 + 1e-9):
            tranche = self._reserve_tranche(amount)
            if tranche is None:
                return None, *self.last
        tranche.left = max(0.0, tranche.left - amount)
        tranche.drawn += amount
        tranche.in_flight += 1
        return _Draw(tranche, amount), *self.last

    def _reserve_tranche(self, amount: float) -> _Tranche | None:
        held = amount if self.near_cap else amount * self.size
        token, *self.last = self.ledger.reserve(held)  # type: ignore[assignment]
        # Refused: the room held and no longer needed goes back, and the reservation is tried as
        # asked (as is every later one).
        if token is None and (self._give_back_unneeded() or not self.near_cap):
            self.near_cap = True
            held = amount
            token, *self.last = self.ledger.reserve(held)  # type: ignore[assignment]
        if token is None:
            return None
        self.current = _Tranche(token, held=held, left=held)
        self.live.append(self.current)
        return self.current

    def _give_back_unneeded(self) -> bool:
        """Let each tranche hold only what its draws spent and what those in flight reserved, as
        the ledger would had each of them reserved in it; whether any gave room back."""
        shrink = getattr(self.ledger, "shrink", None)
        gave = False
        for tranche in self.live:
            needed = tranche.spent + tranche.drawn
            if shrink is not None and needed < tranche.held:
                tranche.held, tranche.left, gave = needed, 0.0, True
                shrink(tranche.token, needed)
        return gave

    def settle(self, token: Any, actual: float) -> None:
        tranche = token.tranche
        tranche.spent += actual
        tranche.drawn -= token.amount
        tranche.in_flight -= 1
        if tranche.in_flight == 0:
            if self.current is tranche:
                self.current = None
            self.live.remove(tranche)
            self.ledger.settle(tranche.token, tranche.spent)

    def totals(self) -> tuple[float, float]:
        spent, cap = self.ledger.totals()
        return spent + sum(t.spent for t in self.live), cap


class RoomHeld(BudgetReached):
    """A reservation refused while calls of this budget hold room they may give back when they
    settle (``Budget(waits=True)``): the call waits for that (:meth:`Budget.room_freed`) and asks
    again. Never raised past ``ModelClient``."""

    def __init__(self, spent: float, cap: float, budget: Budget, since: int) -> None:
        super().__init__(spent, cap)
        self.budget = budget
        self.since = since


class Budget:
    """A cap every call of an invocation (or a batch) reserves against.

    Once a reservation is refused the budget stays reached: no later call starts (a
    smaller one might fit, but the run stops where it stood, and says so). With ``waits``
    (a batch's workers), a refusal while reservations this budget made are still held (its own
    calls in flight) is not final: the call waits for one of them to settle and asks again
    (``RoomHeld``), and the budget is reached only when a reservation is refused with none of
    them left that could settle before it."""

    def __init__(self, ledger: Ledger, *, waits: bool = False) -> None:
        self.ledger = ledger
        self.reached: BudgetReached | None = None
        self.waits = waits
        self._held = 0  # reservations made in the ledger and not settled
        self._settled = 0  # how many have been settled, ever
        self._waiting: dict[_Group, int] = {}  # groups a waiting call belongs to: their room waits on it
        self._wakers: list[Any] = []  # the futures of the calls waiting (:meth:`room_freed`)

    @classmethod
    def capped(cls, cap: float) -> Budget:
        return cls(MemoryLedger(check_cap(cap)))

    def reserve(self, amount: float) -> Any:
        """A token for :meth:`settle`, or ``BudgetReached`` (``RoomHeld``: wait, then ask again).
        A call started within :func:`together`'s block draws on its group's one reservation."""
        if self.reached is not None:
            observers.spend_refused()
            raise self.reached
        group = _GROUP.get()
        if group is not None and group.budget is self and group.calls_left > 0:
            if group.token is None:  # the first call of the group reserves for all of them
                group.token = self._reserve(amount * group.calls_left)
                group.left = amount * group.calls_left
            if amount <= group.left * (1 + 1e-9):
                group.left -= amount
                group.calls_left -= 1
                group.in_flight += 1
                return _Drawn(group, amount)
        return self._reserve(amount)

    def _reserve(self, amount: float) -> Any:
        token, spent, cap = self.ledger.reserve(amount)
        if token is None:
            if self.waits and self._may_free():
                raise RoomHeld(spent, cap, self, self._settled)
            self.reached = BudgetReached(spent, cap)
            observers.spend_refused()
            self._wake()  # the calls waiting stop too
            raise self.reached
        self._held += 1
        return token

    def _may_free(self) -> bool:
        """Whether a reservation this budget holds may settle without the calls now waiting: one
        of a group a waiting call (or the caller) belongs to settles only after that call."""
        mine = _GROUP.get()
        stuck = {g for g in self._waiting if g.token is not None}
        if mine is not None and mine.budget is self and mine.token is not None:
            stuck.add(mine)
        return self._held > len(stuck)

    async def room_freed(self, since: int) -> None:
        """Return once a reservation of this budget has settled after ``since`` (``RoomHeld.since``),
        or at once if none may (the caller then asks again, and is refused for good)."""
        import asyncio

        if self._settled != since or self.reached is not None:
            return
        group = _GROUP.get()
        group = group if group is not None and group.budget is self and group.token is not None else None
        waker = asyncio.get_running_loop().create_future()
        self._wakers.append(waker)
        if group is not None:
            self._waiting[group] = self._waiting.get(group, 0) + 1
        try:
            if not self._may_free():  # every reservation left waits on a waiting call
                self._wake()
            await waker
        finally:
            self._wakers.remove(waker)
            if group is not None:
                self._waiting[group] -= 1
                if not self._waiting[group]:
                    del self._waiting[group]

    def _wake(self) -> None:
        for waker in self._wakers:
            if not waker.done():
                waker.set_result(None)

    def settle(self, token: Any, actual: float) -> None:
        if isinstance(token, _Drawn):
            group = token.group
            group.spent += actual
            group.in_flight -= 1
            group.settle_if_over()
        else:
            self._settle(token, actual)

    def release(self, token: Any) -> None:
        """End a reservation whose call cost nothing (answered with an error, or never sent). A
        call of a group gives its share back to the group, as if it had not started: its retry
        draws on it instead of reserving beside it."""
        if isinstance(token, _Drawn):
            group = token.group
            group.left += token.amount
            group.calls_left += 1
        self.settle(token, 0.0)

    def _settle(self, token: Any, actual: float) -> None:
        try:
            self.ledger.settle(token, actual)
        finally:  # a settlement the store lost still ends the reservation here: no call waits on it
            self._held -= 1
            self._settled += 1
            self._wake()

    def totals(self) -> tuple[float, float]:
        return self.ledger.totals()

    def summary(self) -> str:
        spent, cap = self.totals()
        return f"spent {usd(spent)} of {usd(cap)}"


_SPENDING: ContextVar[Budget | None] = ContextVar("council_spending", default=None)


@contextmanager
def spending(budget: Budget | None) -> Iterator[None]:
    """Calls made within the block (in it or in tasks it creates) reserve against ``budget``
    rather than their client's own: a session's cap, whichever clients it shares with others
    (``council.api.Council``). None: nothing changes."""
    if budget is None:
        yield
        return
    reset = _SPENDING.set(budget)
    try:
        yield
    finally:
        _SPENDING.reset(reset)


def budget_in_force(own: Budget | None) -> Budget | None:
    """The budget a call reserves against: the block's (:func:`spending`), else its client's ``own``."""
    return _SPENDING.get() or own


@dataclass(frozen=True)
class CallPrice:
    """What a model's calls may cost: per-token rates at their highest tier, and the most
    output tokens a call may produce (None: unknown)."""

    input: float
    output: float
    max_output_tokens: int | None

    def worst_case(self, prompt_tokens: int, max_tokens: int | None) -> float | None:
        limit = max_tokens or self.max_output_tokens
        if limit is None:
            return None
        return prompt_tokens * self.input + limit * self.output


@dataclass(eq=False)
class _Group:
    """Calls that are worth something only together, reserving as one (:func:`together`)."""

    budget: Budget
    calls_left: int
    token: Any = None
    left: float = 0.0
    spent: float = 0.0
    in_flight: int = 0
    open: bool = True

    def settle_if_over(self) -> None:
        """Settle the group's reservation once its block has ended and no call of it is in flight."""
        if not self.open and self.in_flight == 0 and self.token is not None:
            token, self.token = self.token, None
            self.budget._settle(token, self.spent)


@dataclass(frozen=True, eq=False)
class _Drawn:
    """A call's share of its group's reservation."""

    group: _Group
    amount: float


_GROUP: ContextVar[_Group | None] = ContextVar("council_budget_group", default=None)


def together(budget: Budget | None, calls: int) -> AbstractContextManager[None]:
    """The first ``calls`` calls started within the block (in it or in tasks it creates) reserve
    as one: the first reserves its worst case for each of them, the others draw on that, so
    either all of them start or none does (docs/methods.md, "Spend caps"). A position-swapped
    vote's two passes are such calls: one sent alone would be spent for nothing. A call whose
    worst case exceeds what is left of the group's reservation, or a call beyond ``calls``
    (a retry), reserves on its own. The reservation is settled at what the calls spent once
    the block has ended and the last of them has. Within an enclosing group of the same budget
    with room for ``calls`` more, the calls are that group's. No budget: nothing to do."""
    if budget is None:  # the usual case, on every vote: no generator to run
        return _NOTHING
    outer = _GROUP.get()
    if outer is not None and outer.budget is budget and outer.calls_left >= calls:
        return _NOTHING  # these calls are already counted in the enclosing group
    return _grouped(budget, calls)


_NOTHING = nullcontext()


@contextmanager
def _grouped(budget: Budget, calls: int) -> Iterator[None]:
    group = _Group(budget, calls)
    reset = _GROUP.set(group)
    try:
        yield
    finally:
        _GROUP.reset(reset)
        group.open = False
        group.settle_if_over()
