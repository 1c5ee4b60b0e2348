"""asv benchmarks of numtk.counterfactual: group maps against cvxpy and DAQP on the identical problem, and
the group maps on the demonstration's problems (the library's catalogue, numtk.counterfactual.protocol_problems)."""

from benchmarks._counterfactual import cvxpy_reduced, daqp_reduced, make_group, numtk_map


class GroupMapNative:
    """numtk's compiled path (closed form translation; dual active-set diagonal QP)."""

    params = ([(200, 20), (2_000, 50), (10_000, 100)], [1.01, 1.5, 2.0, 5.0])
    param_names = ["n_d", "K"]
    timeout = 120

    def setup(self, n_d, K):
        self.X, self.w, self.b = make_group(*n_d)

    def time_translation(self, n_d, K):
        numtk_map("translation", self.X, self.w, self.b, K)

    def time_diagonal(self, n_d, K):
        numtk_map("diagonal", self.X, self.w, self.b, K)

    def track_diagonal_cost(self, n_d, K):
        return numtk_map("diagonal", self.X, self.w, self.b, K)


class GroupMapAnchors:
    """The same diagonal QP through DAQP and through cvxpy (Clarabel, OSQP); small and medium sizes."""

    params = ([(200, 20), (2_000, 50)], [1.5, 2.0])
    param_names = ["n_d", "K"]
    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self, n_d, K):
        self.X, self.w, self.b = make_group(*n_d)

    def time_daqp(self, n_d, K):
        daqp_reduced(self.X, self.w, self.b, K)

    def time_cvxpy_clarabel(self, n_d, K):
        cvxpy_reduced(self.X, self.w, self.b, K, "CLARABEL")

    def time_cvxpy_osqp(self, n_d, K):
        cvxpy_reduced(self.X, self.w, self.b, K, "OSQP")


class PsdPath:
    """psd maps over the paper's K grid: one compiled DPP problem versus fresh solves (n = 200, d = 30)."""

    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)
    Ks = (1.01, 1.5, 2.0, 3.5, 5.0, 7.5, 10.0)

    def setup(self):
        self.X, self.w, self.b = make_group(200, 30)

    def time_path(self):
        from numtk.counterfactual import GroupCounterfactualMap

        GroupCounterfactualMap("psd").fit_path(self.X, (self.w, self.b), self.Ks)

    def time_fresh(self):
        from numtk.counterfactual import GroupCounterfactualMap

        for K in self.Ks:
            GroupCounterfactualMap("psd", distortion=K).fit(self.X, (self.w, self.b))


class ProtocolGroups:
    """The demonstration's groups (numtk.counterfactual.protocol_problems, quick settings): one map per
    group of a dataset, fitted from scratch, and the cross-validated protocol on its first group."""

    params = (["synthetic_2d", "breast_cancer", "adult"], ["translation", "diagonal"])
    param_names = ["dataset", "family"]
    timeout = 300

    def setup_cache(self):
        from numtk.counterfactual import protocol_problems

        res = protocol_problems(quick=True, datasets=("synthetic_2d", "breast_cancer", "adult"))
        return {p.name: p for p in res.problems}

    def time_fit_every_group(self, problems, dataset, family):
        from numtk.counterfactual import GroupCounterfactualMap

        p = problems[dataset]
        for idx, target in zip(p.groups, p.targets):
            GroupCounterfactualMap(family, distortion=p.distortions[-1], target=target).fit(p.X[idx], p.classifier)

    def time_protocol_first_group(self, problems, dataset, family):
        from numtk.counterfactual import evaluate_group_maps

        p = problems[dataset]
        evaluate_group_maps(p.X[p.groups[0]], p.classifier, families=(family,), distortions=p.distortions,
                            target=p.targets[0], baselines=())
