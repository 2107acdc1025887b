"""Fair Tree (Slurm's default fair-share algorithm since 19.05): users ranked by a walk of the account tree.

The association tree: ``root`` → accounts (any depth, each with raw shares) → users (leaves, with raw shares).
A job is charged to its user (``job.user``) under the account of its team (``job.team``); ``accounts`` may place
teams under parent accounts. An account or user not configured has 1 raw share (Slurm's default ``Fairshare``),
and a team that is not a configured account is an account of its own under ``root`` (a team named ``root`` puts
its users directly under root). Usage is exactly decayed GPU-seconds (:class:`~baselines.fairshare.DecayedUsage`);
an account's usage is the sum of its subtree's.

The rules, from Slurm's ``fair_tree.html`` (and ``fair_tree.c``, which implements it):

- Level Fairshare of an association among its siblings, "only considering the shares and usage of itself and its
  siblings": ``LF = S / U`` with ``S = Sraw_self / Sraw_self+siblings`` and ``U = Uraw_self / Uraw_self+siblings``.
  "Level FS values are infinity if the association has no usage" (``fair_tree.c``: U = 0, also when the parent has
  no usage at all, and "U can be 0. The result is infinity, a valid value").
- The tree is "sorted by Level Fairshare with the highest values on the left. The tree is then visited in a
  depth-first traversal. Users are ranked in pre-order as they are found": ``rank`` starts at the number of users
  and a user's factor is ``rank / number of users`` ("The highest ranked user receives a 1.0 fairshare value"),
  ``rank`` going down by one per user found.
- Ties: "Sibling users with the same Level Fairshare receive the same rank" (the next user found after a tie gets
  the rank it would have had without it, as ``fair_tree.c`` keeps a rank-without-ties counter); "A user with the
  same Level Fairshare as a sibling account will receive the same rank as its highest ranked user" (users sort
  before accounts of equal LF, and the account's first child starts tied); "Sibling accounts with the same Level
  Fairshare have their children lists merged before descending" (the merged children keep the LF computed among
  their own siblings, and are sorted together). This follows the documentation: Slurm's own ``fair_tree.c``
  (``_count_tied_accounts``, unchanged since 2014) stops counting at the first account, so it never merges, and
  there the second of two tied accounts starts tied with the first one's last user instead.

Sibling order among equal-LF associations of one kind is by name, which changes no factor. Slurm ranks every user
association in its database; here the users are those that have submitted a job so far (the users the usage
tracker knows), each one association: a user who submits under several teams stays under its first team seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from baselines.fairshare import DEFAULT_HALF_LIFE_S, DecayedUsage
from envs.core.errors import ConfigError
from envs.core.job import Job
from envs.sim.view import View

ROOT = "root"
"""The root account: the parent of top-level accounts (a reserved name)."""

ROOT_USER = "root@root"
"""The association of the user ``root`` in the account ``root`` (:class:`FairTree`'s ``root_user``)."""

DEFAULT_SHARES = 1.0
"""Raw shares of an account or user not configured (Slurm's default ``Fairshare=1``)."""

ACCOUNT_KEYS = ("shares", "parent")


def _shares(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{where}: must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class AccountTree:
    """The configured part of the association tree (validated): each account's parent and raw shares, and the raw
    shares of named users. Build it with :meth:`from_config`."""

    parents: Mapping[str, str]  # account -> parent account (ROOT for a top-level account)
    shares: Mapping[str, float]  # account -> raw shares
    user_shares: Mapping[str, float] = field(default_factory=dict)  # user -> raw shares

    @classmethod
    def from_config(cls, accounts: Mapping[str, Mapping[str, object]] | None = None,
                    users: Mapping[str, float] | None = None, where: str = "fairtree") -> AccountTree:
        """The tree of ``accounts`` (``{name: {"shares": raw shares (default 1), "parent": account (default
        "root")}}``) and ``users`` (``{user: raw shares}``); raises :class:`ConfigError` naming the bad key."""
        accounts, users = accounts or {}, users or {}
        if not isinstance(accounts, Mapping):
            raise ConfigError(f"{where}: accounts: must be a mapping of account name to settings")
        if not isinstance(users, Mapping):
            raise ConfigError(f"{where}: users: must be a mapping of user name to raw shares")
        parents: dict[str, str] = {}
        shares: dict[str, float] = {}
        for name, settings in accounts.items():
            key = f"{where}: accounts[{name!r}]"
            if not isinstance(name, str) or not name or name == ROOT:
                raise ConfigError(f"{key}: an account name must be a non-empty string other than {ROOT!r}")
            if not isinstance(settings, Mapping):
                raise ConfigError(f"{key}: must be a mapping with keys {', '.join(ACCOUNT_KEYS)}")
            unknown = [k for k in settings if k not in ACCOUNT_KEYS]
            if unknown:
                raise ConfigError(f"{key}: unknown key(s) {', '.join(map(repr, unknown))} "
                                  f"(known: {', '.join(ACCOUNT_KEYS)})")
            shares[name] = _shares(settings.get("shares", DEFAULT_SHARES), f"{key}: shares")
            parent = settings.get("parent", ROOT)
            if not isinstance(parent, str) or (parent != ROOT and parent not in accounts):
                raise ConfigError(f"{key}: parent: unknown account {parent!r} (known: {ROOT}, {', '.join(accounts)})")
            parents[name] = parent
        for name in parents:
            path = [name]
            while path[-1] != ROOT:
                path.append(parents[path[-1]])
                if path[-1] in path[:-1]:
                    raise ConfigError(f"{where}: accounts[{name!r}]: parent: cycle {' -> '.join(path)}")
        user_shares = {user: _shares(value, f"{where}: users[{user!r}]") for user, value in users.items()}
        return cls(parents, shares, user_shares)


@dataclass(eq=False)
class Association:
    """An account or a user of the association tree, with its usage and Level Fairshare (what ``sshare -l`` shows
    as RawShares, RawUsage and Level FS)."""

    name: str
    is_user: bool
    shares: float  # raw shares
    usage: float = 0.0  # decayed usage of its subtree [GPU-seconds]
    level_fs: float = math.inf  # LF = S / U among its siblings (inf without usage; inf for root)
    children: list[Association] = field(default_factory=list)


def association_tree(tree: AccountTree, user_accounts: Mapping[str, str],
                     usage: Mapping[str, float]) -> Association:
    """The root of the association tree: the accounts of ``tree`` and of ``user_accounts`` (user -> the account it
    is charged to), the users under them with their ``usage`` [GPU-seconds] (0 if missing), every association's
    subtree usage and Level Fairshare set."""
    root = Association(ROOT, False, DEFAULT_SHARES)
    accounts = {ROOT: root}

    def account(name: str) -> Association:
        node = accounts.get(name)
        if node is None:
            node = accounts[name] = Association(name, False, tree.shares.get(name, DEFAULT_SHARES))
            account(tree.parents.get(name, ROOT)).children.append(node)
        return node

    for name in tree.parents:
        account(name)
    for user, name in user_accounts.items():
        account(name).children.append(
            Association(user, True, tree.user_shares.get(user, DEFAULT_SHARES), usage.get(user, 0.0)))

    def set_level_fs(node: Association) -> None:
        for child in node.children:
            set_level_fs(child)
        if node.children:
            node.usage = sum(child.usage for child in node.children)
            level_shares = sum(child.shares for child in node.children)
            for child in node.children:
                share = child.shares / level_shares  # S
                used = child.usage / node.usage if node.usage > 0 else 0.0  # U
                child.level_fs = share / used if used > 0 else math.inf

    set_level_fs(root)
    return root


def fair_tree_factors(tree: AccountTree, user_accounts: Mapping[str, str],
                      usage: Mapping[str, float]) -> dict[str, float]:
    """The Fair Tree factor in (0, 1] of every user of ``user_accounts`` (user -> the account it is charged to),
    given each user's ``usage`` [GPU-seconds] (a user missing from it has used nothing); module docstring."""
    n_users = len(user_accounts)
    factors: dict[str, float] = {}
    rank = rank_no_ties = n_users

    def visit(siblings: Iterable[Association], tied_with_previous: bool) -> None:
        nonlocal rank, rank_no_ties
        ordered = sorted(siblings, key=lambda n: (-n.level_fs, not n.is_user, n.name))
        i = 0
        while i < len(ordered):
            node = ordered[i]
            tied = tied_with_previous if i == 0 else node.level_fs == ordered[i - 1].level_fs
            if node.is_user:
                if not tied:
                    rank = rank_no_ties
                factors[node.name] = rank / n_users
                rank_no_ties -= 1
                i += 1
            else:
                end = i + 1
                while end < len(ordered) and not ordered[end].is_user and ordered[end].level_fs == node.level_fs:
                    end += 1
                visit([child for merged in ordered[i:end] for child in merged.children], tied)
                i = end

    visit(association_tree(tree, user_accounts, usage).children, False)
    return factors


class FairTree:
    """Fair Tree factors per user (module docstring) from exact decayed usage, cached per decision state.

    Arguments: ``accounts`` — ``{name: {"shares": raw shares, "parent": account}}``, both keys optional (defaults
    1 and ``"root"``); ``users`` — raw shares per user (default 1); ``half_life_s`` — decay half-life of usage [s]
    (Slurm PriorityDecayHalfLife, default 7 days; inf = no decay); ``where`` — what to name in config errors;
    ``root_user`` — rank :data:`ROOT_USER` too, the user ``root`` of the account ``root`` that Slurm's database
    always holds (it has no jobs, so it ranks first, and every other factor is that of Slurm: 1/3 and 2/3, not 1/2
    and 1, for the users of two accounts).
    """

    def __init__(self, accounts: Mapping[str, Mapping[str, object]] | None = None,
                 users: Mapping[str, float] | None = None, half_life_s: float = DEFAULT_HALF_LIFE_S,
                 where: str = "fairtree", root_user: bool = False) -> None:
        self.tree = AccountTree.from_config(accounts, users, where)
        self.root_user = root_user
        self.usage = DecayedUsage(half_life_s, by="user")
        self.reset()

    def reset(self) -> None:
        """Forget all usage and every user's account."""
        self.usage.reset()
        self._forget_users()

    def _forget_users(self) -> None:
        self._view: View | None = None
        self._time_s = -math.inf
        self._seen = 0  # ended records whose users are in _user_accounts
        self._user_accounts: dict[str, str] = {}  # user -> account (its first team seen)
        self._version = -1  # usage version the factors below were computed from
        self._factors: dict[str, float] = {}

    def account(self, job: Job) -> str:
        """The association ``job`` is charged to: its user (under its team's account)."""
        return job.user

    def factors(self, view: View, as_of_s: float | None = None) -> dict[str, float]:
        """The factor in (0, 1] of every user seen so far, at ``view.time_s``; ``as_of_s`` [s]: a pass that fell due
        then, computed late (nothing happened in between but arrivals), so that jobs submitted after it do not make
        their users known. Shared with the cache: do not modify."""
        usage = self.usage.at(view)
        if self.usage.version == self._version:
            return self._factors
        if view is not self._view or view.time_s < self._time_s or view.n_ended < self._seen:
            self._forget_users()  # another run (the usage tracker has just started over too)
            self._view = view
        self._time_s = view.time_s
        new = view.ended_since(self._seen)
        self._seen += len(new)
        jobs = [record.job for record in new]
        jobs += [running.job for running in view.running.values()]
        jobs += [job for job in view.pending.values() if as_of_s is None or job.submit_time_s <= as_of_s]
        for job in jobs:
            self._user_accounts.setdefault(job.user, job.team)
        if self.root_user:
            self._user_accounts.setdefault(ROOT_USER, ROOT)
        self._version = self.usage.version
        self._factors = fair_tree_factors(self.tree, self._user_accounts, usage)
        return self._factors
