"""Deep-RL best-response oracles for :func:`numtk.games.psro` (Global PSRO, arXiv 2605.28273).

The games of :mod:`numtk.games` keep no game tree, only the sequence form. The rollouts here run on a Markov
chain built from it (:class:`RolloutEnv`): a state is a pair ``(s0, s1)`` of the players' last sequences, and
from a state the next event is a decision of player 0 at an infoset ``I`` (weight ``W0[I, s1]``, the chance
reach of the game's ``infoset_reach`` table), a decision of player 1 at ``J`` (``W1[J, s0]``), or the end of
the game (the rest of the state's chance mass, paying ``A[s0, s1]`` divided by that mass). The probability
that the chain reaches a state under any pair of policies is its chance mass times both players' realization
weights, exactly as in the game, so every expected payoff, and the joint law of a player's own decisions and
payoff, is the game's; the chain only merges histories a player cannot tell apart from the pair of sequences.
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from numtk._lib import as_map
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_int, check_option, check_real
from numtk._lib._workers import _check_count
from numtk.torch._common import numpy_rng, torch, torch_threads

__all__ = ["RLBestResponseOracle", "ConditionalBROracle", "RolloutEnv", "ALGORITHMS"]

#: the policy-optimisation algorithms of the oracles
ALGORITHMS = ("ppo", "pg")
_TOL = 1e-9
_DTYPE = torch.float32
MAX_STEPS = 10**9        # environment steps per training run
MAX_EPISODES = 10**6     # episodes per update


# ------------------------------------------------------------------------------------------------------------
# the rollout environment


@constraints(game="option")
class RolloutEnv:
    """Vectorised episodes of a numtk.games game, on the sequence-pair chain of its sequence form.

    Parameters
    ----------
    game : MatrixGame, KuhnPoker, LeducPoker or Goofspiel
        A zero-sum game of :mod:`numtk.games`; a matrix game must be symmetric (members of a shared
        population are strategy ids played in both seats).

    Attributes
    ----------
    n_rows : int
        Infoset rows of a tabular policy (player 0's first); 2 for a matrix game (one infoset per seat).
    max_actions : int
        Columns of a tabular policy.
    legal : ndarray of bool, shape (n_rows, max_actions)
        Legal actions of each row.
    row_player : ndarray of int8, shape (n_rows,)
        The player owning each row.
    features : ndarray of int64, shape (n_rows, L)
        The feature ids of each row, padded with ``n_features``: the row's own id and the player's earlier
        sequences (its action history, from ``parent_sequence``); a symmetric matrix game's two rows share
        feature 0, so a learner plays one strategy in both seats.
    n_features : int
        Number of feature ids (the padding id excluded).
    n_states, n_events : int
        Size of the chain.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.games import KuhnPoker
    >>> from numtk.torch.psro_oracle import RolloutEnv
    >>> game = KuhnPoker()
    >>> env = RolloutEnv(game)
    >>> env.n_rows, env.max_actions
    (12, 2)
    >>> uniform = game.uniform_policy()
    >>> E = 100000   # episodes: the learner (uniform) in seat 0 against member 0 (uniform)
    >>> out = env.rollout([uniform], uniform, np.zeros(E, int), np.zeros(E, int), np.zeros(E, int), rng=0)
    >>> bool(abs(out["payoff0"].mean() - 0.125) < 0.01)   # the exact value r0' A r1 = 1/8
    True
    >>> 2 * E <= out["steps"] <= 3 * E                     # two or three moves an episode
    True
    """

    def __init__(self, game: Any) -> None:
        from numtk.games import MatrixGame

        self.matrix = isinstance(game, MatrixGame)
        if not self.matrix and not all(hasattr(game, a) for a in ("sequence_form", "policy_to_sequence",
                                                                    "check_policy", "legal_mask")):
            raise TypeError(f"`game` must be a MatrixGame or an extensive-form game of numtk.games (KuhnPoker(), "
                            f"LeducPoker(), Goofspiel(n)); got {type(game).__name__}")
        if not (getattr(game, "is_zero_sum", False) or getattr(game, "is_constant_sum", False)):
            raise ValueError("`game` must be zero-sum (or constant-sum)")
        self.game = game
        if self.matrix:
            if not game.is_symmetric:
                raise ValueError("`game`: a matrix game must be symmetric (members play both seats)")
            self._build_matrix(np.asarray(game.zero_sum_payoff, dtype=np.float64))
        else:
            self._build_efg(game)
        self._finish()

    # ---- construction ----------------------------------------------------------------------------------------
    def _build_matrix(self, A: np.ndarray) -> None:
        n = A.shape[0]
        self.n_rows, self.max_actions = 2, n
        self.legal = np.ones((2, n), dtype=bool)
        self.row_player = np.array([0, 1], dtype=np.int8)
        # states: 0 root, 1 + a after player 0's a, 1 + n + a * n + b terminal pairs
        ev_state, ev_row, ev_w, ev_pay = [0], [0], [1.0], [np.nan]
        nxt = [np.arange(1, n + 1)]
        for a in range(n):
            ev_state.append(1 + a)
            ev_row.append(1)
            ev_w.append(1.0)
            ev_pay.append(np.nan)
            nxt.append(1 + n + a * n + np.arange(n))
        for a in range(n):
            for b in range(n):
                ev_state.append(1 + n + a * n + b)
                ev_row.append(-1)
                ev_w.append(1.0)
                ev_pay.append(A[a, b])
                nxt.append(np.full(n, -1))
        self._raw = (np.array(ev_state), np.array(ev_row), np.array(ev_w), np.array(ev_pay), np.array(nxt),
                     np.ones(1 + n + n * n))
        self.features = np.zeros((2, 1), dtype=np.int64)
        self.n_features = 1

    def _build_efg(self, game: Any) -> None:
        sf = game.sequence_form()
        n0, n1 = (int(v) for v in game.n_infosets)
        s0n, s1n = (int(v) for v in game.n_sequences)
        A = game.max_actions
        self.n_rows, self.max_actions = n0 + n1, A
        self.legal = np.asarray(game.legal_mask, dtype=bool)
        self.row_player = np.asarray(game.infoset_player, dtype=np.int8)
        ps, fs, na, sa, si = sf.parent_sequence, sf.first_sequence, sf.n_actions, sf.sequence_action, \
            sf.sequence_infoset
        key_parts, rows, weights, nexts = [], [], [], []
        for p, W in enumerate(sf.infoset_reach):
            W = W.tocoo()
            I, s_opp, w = W.row.astype(np.int64), W.col.astype(np.int64), np.asarray(W.data, dtype=np.float64)
            keep = w > 0
            I, s_opp, w = I[keep], s_opp[keep], w[keep]
            own = ps[p][I].astype(np.int64)
            key_parts.append(own * s1n + s_opp if p == 0 else s_opp * s1n + own)
            rows.append(I + (0 if p == 0 else n0))
            weights.append(w)
            nx = np.full((I.size, A), -1, dtype=np.int64)
            for k in range(int(na[p].max()) if na[p].size else 0):
                has = k < na[p][I]
                seq = (fs[p][I] + k)[has].astype(np.int64)
                act = sa[p][seq]
                key = seq * s1n + s_opp[has] if p == 0 else s_opp[has] * s1n + seq
                nx[np.flatnonzero(has), act] = key
            nexts.append(nx)
        dec_key = np.concatenate(key_parts)
        dec_row = np.concatenate(rows)
        dec_w = np.concatenate(weights)
        dec_next = np.concatenate(nexts)
        Ac = sf.payoff.tocoo()
        term_key = Ac.row.astype(np.int64) * s1n + Ac.col.astype(np.int64)
        term_v = np.asarray(Ac.data, dtype=np.float64)
        # chance mass of every state: 1 at the root, else the weights of the decisions leading into it
        into = dec_next[dec_next >= 0]
        into_w = np.repeat(dec_w, (dec_next >= 0).sum(axis=1))
        keys = np.unique(np.concatenate([[0], dec_key, into, term_key]))
        mass = np.zeros(keys.size)
        np.add.at(mass, np.searchsorted(keys, into), into_w)
        mass[0] += 1.0
        out = np.zeros(keys.size)
        np.add.at(out, np.searchsorted(keys, dec_key), dec_w)
        end = mass - out
        t_idx = np.searchsorted(keys, term_key)
        scale = max(1.0, float(mass.max()))
        if np.any(end < -_TOL * scale):
            raise ValueError(f"`game`: its sequence form is not a chain of sequence pairs ({type(game).__name__}: "
                             "a state's decisions outweigh its chance mass)")
        has_term = np.zeros(keys.size, dtype=bool)
        has_term[t_idx] = True
        if np.any((end > _TOL * scale) & ~has_term) or np.any(end[t_idx] <= _TOL * scale * 1e-3):
            raise ValueError(f"`game`: its sequence form is not a chain of sequence pairs ({type(game).__name__}: "
                             "terminal chance mass and payoff pattern disagree)")
        ev_state = np.concatenate([np.searchsorted(keys, dec_key), t_idx])
        ev_row = np.concatenate([dec_row, np.full(t_idx.size, -1)])
        ev_w = np.concatenate([dec_w, end[t_idx]])
        ev_pay = np.concatenate([np.full(dec_row.size, np.nan), term_v / end[t_idx]])
        nxt = np.where(dec_next >= 0, np.searchsorted(keys, np.maximum(dec_next, 0)), -1)
        nxt = np.vstack([nxt, np.full((t_idx.size, A), -1, dtype=np.int64)])
        self._raw = (ev_state, ev_row, ev_w, ev_pay, nxt, mass)
        # features: the row id, then the player's earlier sequences (ids offset past the rows)
        feats = []
        off = [n0 + n1, n0 + n1 + s0n]
        for p, n in ((0, n0), (1, n1)):
            for I in range(n):
                f = [I + (0 if p == 0 else n0)]
                s = int(ps[p][I])
                while s != 0:
                    f.append(off[p] + s)
                    s = int(ps[p][int(si[p][s])])
                feats.append(f)
        L = max(len(f) for f in feats)
        self.n_features = n0 + n1 + s0n + s1n
        self.features = np.full((n0 + n1, L), self.n_features, dtype=np.int64)
        for r, f in enumerate(feats):
            self.features[r, :len(f)] = f

    def _finish(self) -> None:
        ev_state, ev_row, ev_w, ev_pay, nxt, mass = self._raw
        del self._raw
        order = np.argsort(ev_state, kind="stable")
        ev_state, ev_row, ev_w, ev_pay, nxt = ev_state[order], ev_row[order], ev_w[order], ev_pay[order], nxt[order]
        self.n_states = int(mass.size)
        self.n_events = int(ev_state.size)
        prob = ev_w / mass[ev_state]
        csum = np.cumsum(prob)
        ptr = np.searchsorted(ev_state, np.arange(self.n_states + 1))
        start = np.r_[0.0, csum][ptr[:-1]]
        # global key: state id + cumulative probability within the state (increasing along the events)
        self._cum = ev_state + (csum - start[ev_state])
        self._ptr = ptr
        self._row = ev_row.astype(np.int64)
        self._pay = ev_pay
        self._next = nxt.astype(np.int64)
        self._last_legal = (self.max_actions - 1 - np.argmax(self.legal[:, ::-1], axis=1)).astype(np.int64)

    # ---- episodes --------------------------------------------------------------------------------------------
    def _policy_table(self, members: Any) -> np.ndarray:
        """Members as tabular policies ``(k, n_rows, max_actions)`` (a matrix game's ids played in both seats)."""
        if self.matrix and np.ndim(members) <= 1:
            ids = np.asarray(members, dtype=np.int64).reshape(-1)
            out = np.zeros((ids.size, 2, self.max_actions))
            out[np.arange(ids.size), 0, ids] = 1.0
            out[np.arange(ids.size), 1, ids] = 1.0
            return out
        arr = np.asarray(members, dtype=np.float64)
        return arr.reshape(-1, self.n_rows, self.max_actions)

    def _sample_actions(self, cum: np.ndarray, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Actions drawn from rows of cumulative policies ``cum`` (m, max_actions) with uniforms ``u``."""
        a = (cum < u[:, None]).sum(axis=1)
        return np.minimum(a, self._last_legal[rows])

    def _check_members(self, members: Any, name: str) -> np.ndarray:
        if self.matrix and np.ndim(members) <= 1:
            from numtk._lib._validation import as_array

            ids = as_array(members, name, kinds="biu").reshape(-1)
            if ids.size == 0 or np.any(ids < 0) or np.any(ids >= self.max_actions):
                raise ValueError(f"`{name}` must hold strategy ids in [0, {self.max_actions})")
            return self._policy_table(ids)
        if self.matrix:
            raise ValueError(f"`{name}` must be strategy ids of the matrix game")
        pol = self.game.check_policy(members, name=name)
        return pol[None] if pol.ndim == 2 else pol

    @constraints(opponents="any", learner_policy="any", member="array1d", seat="array1d", context="array1d",
                 rng="rng", act="callable")
    def rollout(self, opponents: Any, learner_policy: Any, member: np.ndarray, seat: np.ndarray,
                context: np.ndarray, *, rng: Any = None, act=None) -> dict:
        """Play ``member.size`` episodes at once; see :class:`RolloutEnv`.

        Parameters
        ----------
        opponents : array_like, shape (k, n_rows, max_actions)
            Tabular policies of the opponent members (or a matrix game's strategy ids); checked by the game's
            ``check_policy``.
        learner_policy : array_like or None
            A tabular policy (or strategy id) for the learner, used when ``act`` is None.
        member, seat, context : ndarray of int, shape (E,)
            Each episode's opponent member, the learner's seat (0 or 1) and a context id passed to ``act``.
        rng : None, int or numpy.random.Generator
            Chance, the opponents' and a tabular learner's draws.
        act : callable, optional
            ``act(rows, context_ids, rng) -> actions``: the learner's moves at infoset ``rows`` (legal action ids,
            not checked).

        Returns
        -------
        out : dict
            ``payoff0`` (E,) player 0's payoff of each episode, ``steps`` (the number of moves of both
            players), and the learner's decisions: ``episode``, ``row``, ``action`` (arrays, in order).
        """
        from numtk._lib._validation import as_array

        gen = numpy_rng(rng)
        opp = self._check_members(opponents, "opponents")
        if act is None:
            if learner_policy is None:
                raise ValueError("`learner_policy` is needed when `act` is None")
            lcum = np.cumsum(self._check_members(learner_policy, "learner_policy")[0], axis=-1)

            def act(rows, ctx, g):
                return self._sample_actions(lcum[rows], rows, g.random(rows.size))
        elif not callable(act):
            raise TypeError("`act` must be a callable act(rows, context_ids, rng) or None")
        arrays = []
        for name, value, high in (("member", member, opp.shape[0]), ("seat", seat, 2), ("context", context, None)):
            arr = as_array(value, name, kinds="biu")
            if arr.ndim != 1:
                raise ValueError(f"`{name}` must be a 1-D array of ints; got shape {arr.shape}")
            if arr.size and (arr.min() < 0 or (high is not None and arr.max() >= high)):
                raise ValueError(f"`{name}` must hold ints in [0, {high if high is not None else 'inf'})")
            arrays.append(arr.astype(np.int64))
        if not arrays[0].size == arrays[1].size == arrays[2].size:
            raise ValueError("`member`, `seat` and `context` must have one entry per episode (the same length)")
        return self._rollout(np.cumsum(opp, axis=-1), arrays[0], arrays[1], arrays[2], gen, act)

    def _rollout(self, opp: np.ndarray, member: np.ndarray, seat: np.ndarray, context: np.ndarray,
                 gen: np.random.Generator, act) -> dict:
        """:meth:`rollout` on checked input: ``opp`` holds the members' cumulative policies."""
        E = member.size
        state = np.zeros(E, dtype=np.int64)
        alive = np.arange(E)
        payoff0 = np.zeros(E)
        steps = 0
        l_ep, l_row, l_act = [], [], []
        while alive.size:
            st = state[alive]
            e = np.searchsorted(self._cum, st + gen.random(alive.size), side="right")
            e = np.minimum(e, self._ptr[st + 1] - 1)
            rows = self._row[e]
            term = rows < 0
            if term.any():
                payoff0[alive[term]] = self._pay[e[term]]
            dec = ~term
            ep, e, rows = alive[dec], e[dec], rows[dec]
            if not ep.size:
                break
            acts = np.empty(ep.size, dtype=np.int64)
            mine = self.row_player[rows] == seat[ep]
            if mine.any():
                acts[mine] = act(rows[mine], context[ep[mine]], gen)
                l_ep.append(ep[mine])
                l_row.append(rows[mine])
                l_act.append(acts[mine])
            theirs = ~mine
            if theirs.any():
                r = rows[theirs]
                acts[theirs] = self._sample_actions(opp[member[ep[theirs]], r], r, gen.random(r.size))
            steps += ep.size
            state[ep] = self._next[e, acts]
            alive = ep
        cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))
        return {"payoff0": payoff0, "steps": steps, "episode": cat(l_ep), "row": cat(l_row), "action": cat(l_act)}


def rollout_env(game: Any) -> RolloutEnv:
    """The cached :class:`RolloutEnv` of ``game`` (built once per game object)."""
    env = game.__dict__.get("_numtk_rollout_env") if hasattr(game, "__dict__") else None
    if env is None:
        env = RolloutEnv(game)
        try:
            game.__dict__["_numtk_rollout_env"] = env
        except (AttributeError, TypeError):  # pragma: no cover
            pass
    return env


# ------------------------------------------------------------------------------------------------------------
# the network and PPO


class _PolicyNet(torch.nn.Module):
    """pi(a | o[, sigma]) and V(o[, sigma]): a sum of feature embeddings (plus a linear map of sigma), then an MLP."""

    def __init__(self, n_features: int, max_actions: int, hidden: Sequence[int], latent: int,
                 gen: "torch.Generator") -> None:
        super().__init__()
        meta = {"device": "meta", "dtype": _DTYPE}
        h0 = hidden[0]
        # sparse gradients: an update touches the rows of the features seen, as in a lazy Adam
        self.embed = torch.nn.EmbeddingBag(n_features + 1, h0, mode="sum", padding_idx=n_features, sparse=True,
                                           **meta)
        self.bias = torch.nn.Parameter(torch.zeros(h0, **meta))
        self.ctx = torch.nn.Linear(latent, h0, bias=False, **meta) if latent else None
        layers: list = []
        for a, b in zip(hidden[:-1], hidden[1:]):
            layers += [torch.nn.Tanh(), torch.nn.Linear(a, b, **meta)]
        layers.append(torch.nn.Tanh())
        self.body = torch.nn.Sequential(*layers)
        self.pi = torch.nn.Linear(hidden[-1], max_actions, **meta)
        self.v = torch.nn.Linear(hidden[-1], 1, **meta)
        # Built on the meta device, then initialised from `gen` alone: torch's global generator is neither read
        # nor advanced, so trainings in concurrent threads (a threaded dask cluster) stay reproducible.
        self.to_empty(device="cpu")
        with torch.no_grad():
            self.embed.weight.normal_(0.0, 1.0, generator=gen)
            self.embed.weight[n_features].zero_()
            self.bias.zero_()
            for mod in self.modules():
                if isinstance(mod, torch.nn.Linear):
                    bound = 1.0 / max(1, mod.in_features) ** 0.5
                    mod.weight.uniform_(-bound, bound, generator=gen)
                    if mod.bias is not None:
                        mod.bias.uniform_(-bound, bound, generator=gen)
            self.pi.weight.mul_(0.01)
            self.pi.bias.zero_()

    def forward(self, feats, sigma=None):
        h = self.embed(feats) + self.bias
        if self.ctx is not None:
            h = h + self.ctx(sigma)
        h = self.body(h)
        return self.pi(h), self.v(h).squeeze(-1)


class _Config:
    """The oracles' hyperparameters (picklable, for process pools and dask)."""

    def __init__(self, hidden, algorithm, steps, lr, entropy_coef, episodes, epochs, minibatches, clip, latent,
                 simplex_eps):
        self.hidden = tuple(hidden)
        self.algorithm = algorithm
        self.steps = steps
        self.lr = lr
        self.entropy_coef = entropy_coef
        self.episodes = episodes
        self.epochs = epochs
        self.minibatches = minibatches
        self.clip = clip
        self.latent = latent
        self.simplex_eps = simplex_eps


def _masked_logits(logits, legal):
    return logits.masked_fill(~legal, -1e9)


def _systematic(weights: np.ndarray, n: int, gen: np.random.Generator) -> np.ndarray:
    """n draws from ``weights`` by systematic sampling, shuffled: each draw has law ``weights``, the counts are
    within one of ``n * weights`` (less variance than independent draws)."""
    c = np.cumsum(weights)
    c /= c[-1]
    idx = np.searchsorted(c, (gen.random() + np.arange(n)) / n, side="right")
    idx = np.minimum(idx, weights.size - 1)
    return gen.permutation(idx)


def _train(env: RolloutEnv, opponents: np.ndarray, sigmas: np.ndarray, leader: int | None, cfg: _Config,
           seed: int) -> tuple[Any, int, list]:
    """PPO (or PG) against realization-weighted mixtures ``sigmas`` (C, k) of ``opponents``.

    Each episode draws a context c (uniform over the C contexts, or, with a ``leader``, a uniform context with
    probability ``simplex_eps`` and the leader otherwise), a pure member from ``sigmas[c]`` and a seat.
    Returns the network, the environment steps used and the mean learner return of each update.
    """
    gen = np.random.default_rng(seed)
    C, k = sigmas.shape
    tgen = torch.Generator().manual_seed(int(gen.integers(2**62)))
    net = _PolicyNet(env.n_features, env.max_actions, cfg.hidden, cfg.latent, tgen)
    dense = [p for name, p in net.named_parameters() if not name.startswith("embed.")]
    opt = torch.optim.Adam(dense, lr=cfg.lr, foreach=True)
    opt_embed = torch.optim.SparseAdam(list(net.embed.parameters()), lr=cfg.lr)
    feats_all = torch.as_tensor(env.features)
    legal_all = torch.as_tensor(env.legal)
    ctx_all = None
    if cfg.latent:
        pad = np.zeros((C, cfg.latent))
        pad[:, :k] = sigmas
        ctx_all = torch.as_tensor(pad, dtype=_DTYPE)
    # per-context samplers of the members (cumulative weights)
    opp_cum = np.cumsum(opponents, axis=-1)
    steps, curve = 0, []
    E = cfg.episodes

    def act(rows, ctx, g):
        with torch.no_grad():
            logits, _ = net(feats_all[rows], None if ctx_all is None else ctx_all[ctx])
            p = torch.softmax(_masked_logits(logits, legal_all[rows]), dim=-1).numpy()
        return env._sample_actions(np.cumsum(p, axis=1), rows, g.random(rows.size))

    while steps < cfg.steps:
        if leader is None:
            ctx = _systematic(np.ones(C), E, gen)
        else:
            explore = gen.random(E) < cfg.simplex_eps
            ctx = np.where(explore, gen.integers(C, size=E), leader)
        member = np.empty(E, dtype=np.int64)
        for c in np.unique(ctx):
            sel = np.flatnonzero(ctx == c)
            member[sel] = _systematic(sigmas[c], sel.size, gen)
        seat = gen.permutation(np.arange(E) % 2)
        out = env._rollout(opp_cum, member, seat, ctx, gen, act)
        steps += out["steps"]
        ep = out["episode"]
        if not ep.size:
            continue
        ret_ep = np.where(seat == 0, out["payoff0"], -out["payoff0"])
        curve.append(float(ret_ep.mean()))
        rows_t = torch.as_tensor(out["row"])
        f = feats_all[rows_t]
        lg = legal_all[rows_t]
        cx = None if ctx_all is None else ctx_all[torch.as_tensor(ctx[ep])]
        a = torch.as_tensor(out["action"])
        R = torch.as_tensor(ret_ep[ep], dtype=_DTYPE)
        with torch.no_grad():
            logits, v_old = net(f, cx)
            logp_old = torch.log_softmax(_masked_logits(logits, lg), -1).gather(1, a[:, None]).squeeze(1)
        adv = R - v_old
        adv = (adv - adv.mean()) / (adv.std() + 1e-8) if adv.numel() > 1 else adv
        n = a.numel()
        epochs = cfg.epochs if cfg.algorithm == "ppo" else 1
        mb = cfg.minibatches if cfg.algorithm == "ppo" else 1
        for _ in range(epochs):
            perm = torch.as_tensor(gen.permutation(n))
            for chunk in torch.tensor_split(perm, mb):
                if not chunk.numel():
                    continue
                logits, v = net(f[chunk], None if cx is None else cx[chunk])
                logp_all = torch.log_softmax(_masked_logits(logits, lg[chunk]), -1)
                logp = logp_all.gather(1, a[chunk, None]).squeeze(1)
                probs = logp_all.exp()
                entropy = -(probs * logp_all.masked_fill(~lg[chunk], 0.0)).sum(-1).mean()
                if cfg.algorithm == "ppo":
                    ratio = torch.exp(logp - logp_old[chunk])
                    surr = torch.minimum(ratio * adv[chunk],
                                         torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * adv[chunk])
                else:
                    surr = logp * adv[chunk]
                loss = -surr.mean() + 0.5 * ((v - R[chunk]) ** 2).mean() - cfg.entropy_coef * entropy
                opt.zero_grad()
                opt_embed.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(dense, 0.5)
                opt.step()
                opt_embed.step()
    return net, steps, curve


def _tabularise(env: RolloutEnv, net, sigmas: np.ndarray | None, latent: int) -> list:
    """Deterministic policies (argmax per infoset row over the legal actions), one per row of ``sigmas``."""
    feats = torch.as_tensor(env.features)
    legal = torch.as_tensor(env.legal)
    out = []
    n = 1 if sigmas is None else sigmas.shape[0]
    with torch.no_grad():
        for j in range(n):
            cx = None
            if latent:
                pad = torch.zeros(env.n_rows, latent, dtype=_DTYPE)
                pad[:, :sigmas.shape[1]] = torch.as_tensor(sigmas[j], dtype=_DTYPE)
                cx = pad
            logits, _ = net(feats, cx)
            a = _masked_logits(logits, legal).argmax(-1).numpy()
            if env.matrix:
                out.append(int(a[0]))
            else:
                pol = np.zeros((env.n_rows, env.max_actions))
                pol[np.arange(env.n_rows), a] = 1.0
                out.append(pol)
    return out


def _train_task(task: tuple) -> tuple[list, int, list]:
    """One training run (module level, so process pools and dask can carry it)."""
    game, members, sigmas, leader, cfg, seed, want = task
    env = rollout_env(game)
    opponents = env._policy_table(members)
    with torch_threads(1):
        net, steps, curve = _train(env, opponents, np.asarray(sigmas, dtype=np.float64), leader, cfg, seed)
        pols = _tabularise(env, net, np.asarray(sigmas, dtype=np.float64)[want] if cfg.latent else None,
                           cfg.latent)
    state = {k: v.detach().clone() for k, v in net.state_dict().items()} if cfg.latent else None
    return pols, steps, curve, state


# ------------------------------------------------------------------------------------------------------------
# the oracles


def _check_hidden(hidden: Any) -> tuple:
    if isinstance(hidden, numbers.Integral) and not isinstance(hidden, bool):
        hidden = (hidden,)
    try:
        hidden = tuple(hidden)
    except TypeError:
        raise TypeError("`hidden` must be a sequence of positive ints") from None
    if not hidden:
        raise ValueError("`hidden` must hold at least one layer width")
    return tuple(check_int(h, "hidden", minimum=1, maximum=1_000_000) for h in hidden)


def _mapper_of(workers: Any):
    """``workers``: None or an int (a process pool), a map-like callable, or a dask.distributed Client."""
    if workers is None:
        return 1
    if hasattr(workers, "map") and hasattr(workers, "gather") and hasattr(workers, "submit"):  # dask Client
        client = workers
        return lambda f, items: client.gather(client.map(f, list(items), pure=False))
    if callable(workers):
        return workers
    return _check_count(workers, "workers")


def _check_call(game: Any, population: Any, targets: Any) -> tuple[RolloutEnv, np.ndarray, np.ndarray]:
    env = rollout_env(game)
    members = np.asarray(population)
    k = members.shape[0] if members.ndim else 0
    if k == 0:
        raise ValueError("`population` must hold at least one member")
    if env.matrix:
        ids = members.astype(np.int64).reshape(-1)
        if ids.size != k or np.any(ids < 0) or np.any(ids >= env.max_actions):
            raise ValueError(f"`population` must hold strategy ids in [0, {env.max_actions})")
    else:
        members = game.check_policy(members, name="population")
        if members.ndim == 2:
            members = members[None]
            k = 1
    try:
        S = np.array([np.asarray(t, dtype=np.float64).reshape(-1) for t in targets])
    except (TypeError, ValueError):
        raise TypeError("`targets` must be a list of weight vectors over the members") from None
    if S.ndim != 2 or S.shape[0] == 0 or S.shape[1] != k:
        raise ValueError(f"`targets` must be a non-empty list of weight vectors of length {k} (the population size)")
    if not np.all(np.isfinite(S)) or np.any(S < -1e-12) or np.any(S.sum(axis=1) <= 0):
        raise ValueError("`targets` must hold finite, non-negative weights with a positive sum")
    S = np.maximum(S, 0.0)
    S /= S.sum(axis=1, keepdims=True)
    return env, members, S


class _OracleBase:
    def _stream(self, rng: Any) -> np.random.Generator:
        if self._gen is not None:
            return self._gen
        return numpy_rng(rng)


@constraints(hidden="any", algorithm="option", steps="count", lr="real>0", entropy_coef="real>=0",
             episodes="int>=2", epochs="count", minibatches="count", clip="real>0", workers="workers",
             rng="rng")
class RLBestResponseOracle(_OracleBase):
    """A deep-RL best-response oracle for :func:`numtk.games.psro`: PPO against a realization-weighted mixture.

    Called as ``oracle(game, population, targets, *, rng)`` (the protocol of :func:`numtk.games.psro`), it
    trains one policy per target mixture and returns each as a tabular deterministic policy (the argmax of
    the network at every infoset; a strategy id for a matrix game). Each training episode draws a pure
    member from the target's weights (so the opponent is realization-equivalent to the mixture; members are
    never mixed behaviourally per infoset), and a seat uniformly; the network sees its own infoset only.

    Parameters
    ----------
    hidden : sequence of int, default (128, 128, 128)
        Widths of the MLP's layers (tanh).
    algorithm : {'ppo', 'pg'}, default 'ppo'
        PPO with clipped ratios, or one policy-gradient step per batch (REINFORCE with a value baseline).
    steps : int, default 20000
        Environment steps (moves of both players, as OpenSpiel's ``Environment.step`` counts them) per target.
    lr : float, default 3e-4
        Adam's learning rate.
    entropy_coef : float, default 0.04
        Weight of the policy's entropy bonus (the paper's value).
    episodes : int, default 256
        Episodes per PPO update.
    epochs, minibatches : int, default 4, 4
        PPO passes over each batch and minibatches per pass.
    clip : float, default 0.2
        PPO's ratio clip.
    workers : None, int, map-like callable or dask.distributed.Client
        Trains the targets of one call in parallel: an int opens a process pool of that many workers, a
        callable is used as ``map``, a dask Client's ``map``/``gather`` carry the tasks. Seeds are drawn per
        target before any training, so results do not depend on ``workers``.
    rng : None, int or numpy.random.Generator
        The oracle's own stream; None uses the ``rng`` of each call (the driver's), so ``psro(..., rng=0)`` is
        reproducible.

    Attributes
    ----------
    env_steps_ : int
        Environment steps used by all calls so far.
    curves_ : list of list of float
        Per trained target, the learner's mean return per update (last call).

    Examples
    --------
    >>> from numtk.games import rock_paper_scissors
    >>> from numtk.torch.psro_oracle import RLBestResponseOracle
    >>> oracle = RLBestResponseOracle(hidden=(16,), steps=4000, lr=0.01, rng=0)
    >>> oracle(rock_paper_scissors(), [0], [[1.0]])   # the best response to rock is paper
    [1]
    """

    def __init__(self, *, hidden: Any = (128, 128, 128), algorithm: str = "ppo", steps: int = 20000,
                 lr: float = 3e-4, entropy_coef: float = 0.04, episodes: int = 256, epochs: int = 4,
                 minibatches: int = 4, clip: float = 0.2, workers: Any = None, rng: Any = None) -> None:
        self.hidden = _check_hidden(hidden)
        self.algorithm = check_option(algorithm, "algorithm", ALGORITHMS)
        self.steps = check_int(steps, "steps", minimum=1, maximum=MAX_STEPS)
        self.lr = check_real(lr, "lr", low=0.0, low_open=True)
        self.entropy_coef = check_real(entropy_coef, "entropy_coef", low=0.0)
        self.episodes = check_int(episodes, "episodes", minimum=2, maximum=MAX_EPISODES)
        self.epochs = check_int(epochs, "epochs", minimum=1, maximum=10_000)
        self.minibatches = check_int(minibatches, "minibatches", minimum=1, maximum=MAX_EPISODES)
        self.clip = check_real(clip, "clip", low=0.0, low_open=True)
        self.workers = workers
        self._mapper = _mapper_of(workers)
        self._gen = None if rng is None else numpy_rng(rng)
        self.env_steps_ = 0
        self.curves_: list = []

    def _config(self, latent: int = 0, simplex_eps: float = 0.0) -> _Config:
        return _Config(self.hidden, self.algorithm, self.steps, self.lr, self.entropy_coef, self.episodes,
                       self.epochs, self.minibatches, self.clip, latent, simplex_eps)

    def __call__(self, game: Any, population: Any, targets: Any, *, rng: Any = None) -> list:
        """Best responses to ``targets`` (weight vectors over ``population``), as tabular deterministic policies.

        Parameters
        ----------
        game : numtk.games game
            A symmetric matrix game or an extensive-form game.
        population : array_like
            The members: strategy ids, or a stack ``(k, n_rows, max_actions)`` of tabular policies.
        targets : list of array_like
            Weight vectors of length ``k``.
        rng : None, int or numpy.random.Generator
            Used when the oracle was built without ``rng``.

        Returns
        -------
        policies : list
            One per target: a deterministic tabular policy (an int strategy id for a matrix game).
        """
        env, members, S = _check_call(game, population, targets)
        gen = self._stream(rng)
        seeds = gen.integers(0, 2**63 - 1, size=S.shape[0])   # drawn up front: independent of `workers`
        cfg = self._config()
        tasks = [(game, members, S[j:j + 1], None, cfg, int(seeds[j]), [0]) for j in range(S.shape[0])]
        with as_map(self._mapper) as mapper:
            results = list(mapper(_train_task, tasks))
        self.env_steps_ += int(sum(r[1] for r in results))
        self.curves_ = [r[2] for r in results]
        return [r[0][0] for r in results]


@constraints(latent_size="count", hidden="any", algorithm="option", simplex_eps="prob", steps="count", lr="real>0",
             entropy_coef="real>=0", episodes="int>=2", epochs="count", minibatches="count", clip="real>0",
             shards="count", workers="workers", rng="rng")
class ConditionalBROracle(RLBestResponseOracle):
    """Global PSRO's conditional exploration oracle: one network pi(a | o, sigma) for many target mixtures.

    A call ``oracle(game, population, targets, *, rng)`` trains one PPO network conditioned on the mixture
    sigma (zero-padded to ``latent_size``): each episode plays against a uniformly drawn target with
    probability ``simplex_eps`` and against the leader (the first target; :func:`numtk.games.psro` puts the
    restricted Nash first) otherwise, with a pure member drawn from that target's weights and a random seat.
    The candidate of target sigma_k is the network's argmax policy at sigma_k; :meth:`candidates` gives them
    for other mixtures of the same population without training.

    Parameters
    ----------
    latent_size : int
        Length of the conditioning vector: the largest population the oracle will see.
    hidden, algorithm, lr, entropy_coef, episodes, epochs, minibatches, clip
        As :class:`RLBestResponseOracle`.
    simplex_eps : float, default 0.8
        Probability of an episode against a random target instead of the leader.
    steps : int, default 20000
        Environment steps per call (shared by all its targets; per shard with ``shards > 1``).
    shards : int, default 1
        Splits the targets after the leader into this many groups, each trained by its own network together
        with the leader (the groups' trainings are independent, so ``workers`` runs them in parallel).
    workers : None, int, map-like callable or dask.distributed.Client
        Carries the shards' trainings; results do not depend on it.
    rng : None, int or numpy.random.Generator
        As :class:`RLBestResponseOracle`.

    Examples
    --------
    >>> from numtk.games import rock_paper_scissors
    >>> from numtk.torch.psro_oracle import ConditionalBROracle
    >>> oracle = ConditionalBROracle(latent_size=3, hidden=(16,), steps=6000, lr=0.01, rng=0)
    >>> oracle(rock_paper_scissors(), [0, 1], [[1.0, 0.0], [0.0, 1.0]])  # paper beats rock, scissors paper
    [1, 2]
    >>> oracle.candidates([[0.0, 1.0]])
    [2]
    """

    def __init__(self, *, latent_size: int, hidden: Any = (128, 128, 128), algorithm: str = "ppo",
                 simplex_eps: float = 0.8, steps: int = 20000, lr: float = 3e-4, entropy_coef: float = 0.04,
                 episodes: int = 256, epochs: int = 4, minibatches: int = 4, clip: float = 0.2, shards: int = 1,
                 workers: Any = None, rng: Any = None) -> None:
        super().__init__(hidden=hidden, algorithm=algorithm, steps=steps, lr=lr, entropy_coef=entropy_coef,
                         episodes=episodes, epochs=epochs, minibatches=minibatches, clip=clip, workers=workers,
                         rng=rng)
        self.latent_size = check_int(latent_size, "latent_size", minimum=1, maximum=100_000)
        self.simplex_eps = check_real(simplex_eps, "simplex_eps", low=0.0, high=1.0)
        self.shards = check_int(shards, "shards", minimum=1, maximum=10_000)
        self._nets: list = []
        self._game = None
        self._k = 0

    def __call__(self, game: Any, population: Any, targets: Any, *, rng: Any = None) -> list:
        """Candidates for ``targets`` from freshly trained conditional network(s); see the class.

        Parameters
        ----------
        game, population, targets, rng
            As :meth:`RLBestResponseOracle.__call__`; at most ``latent_size`` members.

        Returns
        -------
        policies : list
            One deterministic tabular policy (strategy id for a matrix game) per target.
        """
        env, members, S = _check_call(game, population, targets)
        k = S.shape[1]
        if k > self.latent_size:
            raise ValueError(f"`population` has {k} members, more than `latent_size` = {self.latent_size}")
        gen = self._stream(rng)
        n = S.shape[0]
        groups = [[0] + list(range(1 + g, n, self.shards)) for g in range(min(self.shards, max(n - 1, 1)))]
        seeds = gen.integers(0, 2**63 - 1, size=len(groups))
        cfg = self._config(self.latent_size, self.simplex_eps)
        tasks = [(game, members, S[idx], 0, cfg, int(seeds[g]), list(range(len(idx))))
                 for g, idx in enumerate(groups)]
        with as_map(self._mapper) as mapper:
            results = list(mapper(_train_task, tasks))
        out: list = [None] * n
        for idx, (pols, _, _, _) in zip(groups, results):
            for j, pol in zip(idx, pols):
                if out[j] is None:        # the leader's candidate comes from the first shard
                    out[j] = pol
        self.env_steps_ += int(sum(r[1] for r in results))
        self.curves_ = [r[2] for r in results]
        self._nets = [r[3] for r in results]
        self._game, self._k = game, k
        return out

    @constraints(sigmas="array2d")
    def candidates(self, sigmas: Any) -> list:
        """Policies of the last trained network at mixtures ``sigmas`` of the last call's population.

        Parameters
        ----------
        sigmas : list of array_like
            Weight vectors over the population of the last call (length ``k``).

        Returns
        -------
        policies : list
            The argmax policy of pi(. | o, sigma) per mixture (strategy ids for a matrix game).
        """
        if not self._nets:
            raise ValueError("`candidates` needs a trained network: call the oracle first")
        from numtk._lib._validation import as_array

        S = np.array(as_array(sigmas, "sigmas", kinds="biuf"), dtype=np.float64)
        if S.ndim != 2 or S.shape[1] != self._k or S.shape[0] == 0:
            raise ValueError(f"`sigmas` must be weight vectors of length {self._k} (the last population's size)")
        if not np.all(np.isfinite(S)) or np.any(S < 0) or np.any(S.sum(axis=1) <= 0):
            raise ValueError("`sigmas` must hold finite, non-negative weights with a positive sum")
        S = S / S.sum(axis=1, keepdims=True)
        env = rollout_env(self._game)
        net = _PolicyNet(env.n_features, env.max_actions, self.hidden, self.latent_size, torch.Generator())
        net.load_state_dict(self._nets[0])
        with torch_threads(1):
            return _tabularise(env, net, S, self.latent_size)
