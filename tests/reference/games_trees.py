"""Pure-Python game trees of Kuhn poker, Leduc poker and Goofspiel(n): the oracle of tests/games/test_efg.py.

The rules are written again here, independently of numtk's C++ (``efg_tree.hpp``), as plain recursive
walks over immutable states. Infoset keys are spelled directly from the state: OpenSpiel's
information-state strings for Kuhn and Leduc, numtk's action-observation strings for Goofspiel
(``'p<player>|<prize>:<own>v<other>|...|<current prize>'``).

A policy is given as ``policy_fn(player, key) -> probabilities indexed by action id``.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from itertools import permutations

CHANCE = "chance"
TERMINAL = "terminal"


# ----------------------------------------------------------------------------------------------------
# Kuhn poker. State: (cards dealt so far, action string of 'p'/'b').

class Kuhn:
    max_actions = 2

    def initial(self):
        return ((), "")

    def to_move(self, s):
        cards, h = s
        if len(cards) < 2:
            return CHANCE
        if h in ("pp", "bp", "bb", "pbp", "pbb"):
            return TERMINAL
        return len(h) % 2

    def chance(self, s):
        cards, _ = s
        rest = [c for c in range(3) if c not in cards]
        return [(c, Fraction(1, len(rest))) for c in rest]

    def legal(self, s):
        return [0, 1]

    def child(self, s, a):
        cards, h = s
        if len(cards) < 2:
            return (cards + (a,), h)
        return (cards, h + "pb"[a])

    def payoff0(self, s):
        (c0, c1), h = s
        winner = 1 if c0 > c1 else -1
        return {"pp": winner, "bp": 1, "pbp": -1, "bb": 2 * winner, "pbb": 2 * winner}[h]

    def key(self, s, player):
        cards, h = s
        return f"{cards[player]}{h}"


# ----------------------------------------------------------------------------------------------------
# Leduc poker. State: (cards (p0, p1, public), actions of round 1, actions of round 2, folded).

def _leduc_bets(rounds):
    """(money put in by p0 and p1, whose turn, raises in the current round, round over?) after the
    given per-round action lists, replaying the bets from the antes."""
    return _leduc_replay(tuple(rounds))


@lru_cache(maxsize=None)
def _leduc_replay(rounds):
    put = [1, 1]
    turn = 0
    raises = 0
    over = False
    for r, acts in enumerate(rounds):
        turn, raises, over = 0, 0, False
        for i, a in enumerate(acts):
            high = max(put)
            if a == 2:
                put[turn] = high + (2 if r == 0 else 4)
                raises += 1
            elif a == 1:
                put[turn] = high
                over = i > 0
            turn = 1 - turn
    return tuple(put), turn, raises, over


class Leduc:
    max_actions = 3

    def initial(self):
        return ((), (), (), None)

    def to_move(self, s):
        cards, r1, r2, folded = s
        if folded is not None:
            return TERMINAL
        if len(cards) < 2:
            return CHANCE
        _, turn, _, over = _leduc_bets([r1] if len(cards) == 2 else [r1, r2])
        if len(cards) == 2:
            return CHANCE if over else turn
        if over and r2:
            return TERMINAL
        return turn

    def chance(self, s):
        cards = s[0]
        rest = [c for c in range(6) if c not in cards]
        return [(c, Fraction(1, len(rest))) for c in rest]

    def legal(self, s):
        cards, r1, r2, _ = s
        put, _, raises, _ = _leduc_bets([r1] if len(cards) == 2 else [r1, r2])
        acts = [0] if put[0] != put[1] else []
        acts.append(1)
        if raises < 2:
            acts.append(2)
        return acts

    def child(self, s, a):
        cards, r1, r2, folded = s
        if self.to_move(s) == CHANCE:
            return (cards + (a,), r1, r2, folded)
        mover = self.to_move(s)
        if len(cards) == 2:
            r1 = r1 + (a,)
        else:
            r2 = r2 + (a,)
        return (cards, r1, r2, mover if a == 0 else None)

    def payoff0(self, s):
        cards, r1, r2, folded = s
        put, _, _, _ = _leduc_bets([r1, r2])
        if folded == 0:
            return -put[0]
        if folded == 1:
            return put[1]
        ranks = [c // 2 for c in cards]
        strength = [(ranks[p] == ranks[2], ranks[p]) for p in (0, 1)]
        if strength[0] > strength[1]:
            return put[1]
        if strength[1] > strength[0]:
            return -put[0]
        return 0

    def key(self, s, player):
        cards, r1, r2, _ = s
        in_round2 = len(cards) == 3
        put, _, _, _ = _leduc_bets([r1, r2] if in_round2 else [r1])
        text = (f"[Observer: {player}][Private: {cards[player]}][Round {2 if in_round2 else 1}]"
                f"[Player: {player}][Pot: {put[0] + put[1]}][Money: {100 - put[0]} {100 - put[1]}]")
        if in_round2:
            text += f"[Public: {cards[2]}]"
        return text + f"[Round1: {' '.join(map(str, r1))}][Round2: {' '.join(map(str, r2))}]"


# ----------------------------------------------------------------------------------------------------
# Goofspiel(n), turn-based. State: (prizes revealed, finished rounds as (bid0, bid1), pending bid0).

class Goofspiel:
    def __init__(self, n):
        self.n = n
        self.max_actions = n

    def initial(self):
        return ((), (), None)

    def _hand(self, s, player):
        used = {r[player] for r in s[1]}
        return [v for v in range(1, self.n + 1) if v not in used]

    def to_move(self, s):
        prizes, rounds, pending = s
        if len(rounds) == self.n - 1:
            return TERMINAL                     # the last round plays itself
        if len(prizes) == len(rounds):
            return CHANCE
        return 0 if pending is None else 1

    def chance(self, s):
        rest = [v for v in range(1, self.n + 1) if v not in s[0]]
        return [(v - 1, Fraction(1, len(rest))) for v in rest]

    def legal(self, s):
        return [v - 1 for v in self._hand(s, self.to_move(s))]

    def child(self, s, a):
        prizes, rounds, pending = s
        who = self.to_move(s)
        if who == CHANCE:
            return (prizes + (a + 1,), rounds, None)
        if who == 0:
            return (prizes, rounds, a + 1)
        return (prizes, rounds + ((pending, a + 1),), None)

    def payoff0(self, s):
        prizes, rounds, _ = s
        last_prize = [v for v in range(1, self.n + 1) if v not in prizes]
        all_prizes = list(prizes) + last_prize
        all_rounds = list(rounds) + [(self._hand(s, 0)[0], self._hand(s, 1)[0])]
        score = [0, 0]
        for v, (b0, b1) in zip(all_prizes, all_rounds):
            if b0 > b1:
                score[0] += v
            elif b1 > b0:
                score[1] += v
        return (score[0] > score[1]) - (score[0] < score[1])

    def key(self, s, player):
        prizes, rounds, _ = s
        parts = [f"p{player}"]
        for v, bids in zip(prizes, rounds):
            parts.append(f"{v}:{bids[player]}v{bids[1 - player]}")
        parts.append(str(prizes[-1]))
        return "|".join(parts)


def make(name, n_cards=None):
    """The reference game called ``name`` ('kuhn_poker', 'leduc_poker' or 'goofspiel')."""
    if name == "kuhn_poker":
        return Kuhn()
    if name == "leduc_poker":
        return Leduc()
    if name == "goofspiel":
        return Goofspiel(n_cards)
    raise ValueError(name)


# ----------------------------------------------------------------------------------------------------
# Walks.

def expected_payoff(game, policy_fn, exact=False):
    """Player 0's expected payoff when both players follow ``policy_fn(player, key)``."""
    one = Fraction(1) if exact else 1.0

    def walk(s):
        who = game.to_move(s)
        if who == TERMINAL:
            return game.payoff0(s) * one
        if who == CHANCE:
            return sum((p if exact else float(p)) * walk(game.child(s, a)) for a, p in game.chance(s))
        probs = policy_fn(who, game.key(s, who))
        return sum(probs[a] * walk(game.child(s, a)) for a in game.legal(s) if probs[a] != 0)

    return walk(game.initial())


def infosets(game):
    """Per player: the infoset keys in depth-first discovery order (chance outcomes and actions
    ascending), with each infoset's legal actions."""
    found = ({}, {})

    def walk(s):
        who = game.to_move(s)
        if who == TERMINAL:
            return
        if who == CHANCE:
            for a, _ in game.chance(s):
                walk(game.child(s, a))
            return
        found[who].setdefault(game.key(s, who), tuple(game.legal(s)))
        for a in game.legal(s):
            walk(game.child(s, a))

    walk(game.initial())
    return found


def infoset_reach(game):
    """Per player p: ``{(key of p's infoset I, opponent sequence): chance probability}``, summed over
    the histories in ``I`` whose opponent's last own move is that sequence (``(opponent infoset key,
    action)``, or ``None`` before the opponent's first move). Probabilities are exact fractions."""
    found = ({}, {})

    def walk(s, prob, last):
        who = game.to_move(s)
        if who == TERMINAL:
            return
        if who == CHANCE:
            for a, p in game.chance(s):
                walk(game.child(s, a), prob * p, last)
            return
        key = game.key(s, who)
        entry = (key, last[1 - who])
        found[who][entry] = found[who].get(entry, 0) + prob
        for a in game.legal(s):
            moved = list(last)
            moved[who] = (key, a)
            walk(game.child(s, a), prob, tuple(moved))

    walk(game.initial(), Fraction(1), (None, None))
    return found


def tree_size(game):
    """(nodes, terminal histories) of the tree."""
    def walk(s):
        who = game.to_move(s)
        if who == TERMINAL:
            return 1, 1
        kids = [a for a, _ in game.chance(s)] if who == CHANCE else game.legal(s)
        nodes, terms = 1, 0
        for a in kids:
            n, t = walk(game.child(s, a))
            nodes += n
            terms += t
        return nodes, terms

    return walk(game.initial())


def goofspiel_terminals(n):
    """(n!)^3: every prize order times every bid order of each player."""
    return len(list(permutations(range(n)))) ** 3
