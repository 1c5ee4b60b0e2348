// pybind11 bindings of the seriation kernels in native/include/numtk/seriation/.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "numtk/bindings.hpp"
#include "numtk/parallel.hpp"
#include "numtk/seriation/laplacian.hpp"
#include "numtk/seriation/local_pca.hpp"
#include "numtk/seriation/z2sync.hpp"

namespace py = pybind11;

namespace {

using numtk::bindings::carray;  // index arrays: no conversion (int32 and int64 overloads)
using numtk::bindings::check_len;
using numtk::bindings::check_threads;
using numtk::bindings::darray;

// A CSR pattern of n x n: indptr (n + 1) non-decreasing from 0 to nnz, indices in [0, n). Returns n.
template <class I>
std::size_t check_csr(const carray<I>& indptr, const carray<I>& indices) {
    if (indptr.ndim() != 1 || indptr.shape(0) < 1) throw std::invalid_argument("`indptr` must be 1-D, length n + 1");
    if (indices.ndim() != 1) throw std::invalid_argument("`indices` must be 1-D");
    const auto n = static_cast<std::size_t>(indptr.shape(0) - 1);
    const I* p = indptr.data();
    const I* j = indices.data();
    if (p[0] != 0 || static_cast<std::size_t>(p[n]) != static_cast<std::size_t>(indices.shape(0)))
        throw std::invalid_argument("`indptr` must run from 0 to len(indices)");
    for (std::size_t i = 0; i < n; ++i)
        if (p[i + 1] < p[i]) throw std::invalid_argument("`indptr` must be non-decreasing");
    for (py::ssize_t e = 0; e < indices.shape(0); ++e)
        if (j[e] < 0 || static_cast<std::size_t>(j[e]) >= n)
            throw std::out_of_range("`indices` holds a column outside [0, n)");
    return n;
}

// Every one of the `size` entries of a neighbour table lies in [0, rows); else out_of_range with `message`.
template <class I>
void check_table(const I* table, std::size_t size, std::size_t rows, const char* message) {
    for (std::size_t i = 0; i < size; ++i)
        if (table[i] < 0 || static_cast<std::size_t>(table[i]) >= rows) throw std::out_of_range(message);
}

// A breadth-first order (a permutation of [0, n)) and parents (< 0 at roots, else in [0, n)).
template <class I>
void check_tree(const carray<I>& order, const carray<I>& parent, std::size_t n) {
    check_len(order, n, "order");
    check_len(parent, n, "parent");
    std::vector<unsigned char> seen(n, 0);
    const I* o = order.data();
    const I* p = parent.data();
    for (std::size_t a = 0; a < n; ++a) {
        if (o[a] < 0 || static_cast<std::size_t>(o[a]) >= n || seen[std::size_t(o[a])])
            throw std::invalid_argument("`order` must be a permutation of range(n)");
        const I par = p[std::size_t(o[a])];
        if (par >= 0 && (static_cast<std::size_t>(par) >= n || !seen[std::size_t(par)]))
            throw std::invalid_argument("`parent` must precede its child in `order`");
        seen[std::size_t(o[a])] = 1;
    }
}

template <class I>
py::tuple local_pca(darray X, carray<I> nb, int threads, int max_steps, double tol) {
    if (X.ndim() != 2) throw std::invalid_argument("`X` must be 2-D");
    if (nb.ndim() != 2) throw std::invalid_argument("`neighbors` must be 2-D (one row of indices per neighbourhood)");
    threads = check_threads(threads);
    if (max_steps < 2) throw std::invalid_argument("`max_steps` must be at least 2");
    const auto rows = static_cast<std::size_t>(X.shape(0));
    const auto d = static_cast<std::size_t>(X.shape(1));
    const auto n = static_cast<std::size_t>(nb.shape(0));
    const auto k = static_cast<std::size_t>(nb.shape(1));
    if (n > 0 && (d == 0 || k == 0)) throw std::invalid_argument("`X` and `neighbors` need at least one column");
    const I* pn = nb.data();
    check_table(pn, n * k, rows, "`neighbors` holds an index outside the rows of `X`");
    const auto len = static_cast<py::ssize_t>(n);
    py::array_t<double> tangents({len, static_cast<py::ssize_t>(d)});
    py::array_t<double> ratio(len);
    const double* px = X.data();
    double* pt = tangents.mutable_data();
    double* pr = ratio.mutable_data();
    int steps = 0;
    {
        py::gil_scoped_release release;
        steps = numtk::seriation::local_pca(px, n, d, pn, k, pt, pr, threads, max_steps, tol);
    }
    return py::make_tuple(tangents, ratio, steps);
}

template <class I>
py::array_t<double> edge_cosines(darray T, carray<I> indptr, carray<I> indices, int threads) {
    const std::size_t n = check_csr(indptr, indices);
    threads = check_threads(threads);
    if (T.ndim() != 2 || static_cast<std::size_t>(T.shape(0)) != n)
        throw std::invalid_argument("`T` must be 2-D with one row per graph node");
    py::array_t<double> c(indices.shape(0));
    const auto d = static_cast<std::size_t>(T.shape(1));
    {
        py::gil_scoped_release release;
        numtk::seriation::edge_cosines(T.data(), d, indptr.data(), indices.data(), n, c.mutable_data(), threads);
    }
    return c;
}

template <class I>
py::array_t<std::int32_t> shared_neighbours(carray<I> indptr, carray<I> indices, int threads) {
    const std::size_t n = check_csr(indptr, indices);
    threads = check_threads(threads);
    const I* p = indptr.data();
    const I* j = indices.data();
    for (std::size_t i = 0; i < n; ++i)
        for (I e = p[i] + 1; e < p[i + 1]; ++e)
            if (j[e] <= j[e - 1]) throw std::invalid_argument("`indices` must be sorted, without repeats, in each row");
    py::array_t<std::int32_t> s(indices.shape(0));
    {
        py::gil_scoped_release release;
        numtk::seriation::shared_neighbours(indptr.data(), indices.data(), n, s.mutable_data(), threads);
    }
    return s;
}

template <class I>
py::array_t<double> tree_signs(carray<I> indptr, carray<I> indices, darray h, carray<I> order, carray<I> parent,
                               darray z0) {
    const std::size_t n = check_csr(indptr, indices);
    check_len(h, static_cast<std::size_t>(indices.shape(0)), "h");
    check_tree(order, parent, n);
    check_len(z0, n, "z0");
    py::array_t<double> z(static_cast<py::ssize_t>(n));
    std::copy(z0.data(), z0.data() + n, z.mutable_data());
    numtk::seriation::tree_signs(indptr.data(), indices.data(), h.data(), order.data(), n, parent.data(),
                                 z.mutable_data());
    return z;
}

template <class I>
py::tuple power_signs(carray<I> indptr, carray<I> indices, darray h, darray z0, int max_iter, int threads) {
    const std::size_t n = check_csr(indptr, indices);
    check_len(h, static_cast<std::size_t>(indices.shape(0)), "h");
    check_len(z0, n, "z0");
    threads = check_threads(threads);
    if (max_iter < 0) throw std::invalid_argument("`max_iter` must be >= 0");
    py::array_t<double> z(static_cast<py::ssize_t>(n));
    std::copy(z0.data(), z0.data() + n, z.mutable_data());
    int it = 0;
    {
        py::gil_scoped_release release;
        it = numtk::seriation::power_signs(indptr.data(), indices.data(), h.data(), n, z.mutable_data(), max_iter,
                                           threads);
    }
    return py::make_tuple(z, it);
}

template <class I>
double frustration(carray<I> indptr, carray<I> indices, darray w, darray c, darray z) {
    const std::size_t n = check_csr(indptr, indices);
    const auto nnz = static_cast<std::size_t>(indices.shape(0));
    check_len(w, nnz, "w");
    check_len(c, nnz, "c");
    check_len(z, n, "z");
    return numtk::seriation::frustration(indptr.data(), indices.data(), w.data(), c.data(), z.data(), n);
}

template <class I>
py::array_t<double> smooth_lines(darray T, darray w, carray<I> nb, int steps, int threads) {
    if (T.ndim() != 2) throw std::invalid_argument("`T` must be 2-D (one line per row)");
    if (nb.ndim() != 2 || nb.shape(0) != T.shape(0))
        throw std::invalid_argument("`neighbors` must be 2-D with one row of indices per row of `T`");
    const auto n = static_cast<std::size_t>(T.shape(0));
    const auto d = static_cast<std::size_t>(T.shape(1));
    const auto k = static_cast<std::size_t>(nb.shape(1));
    check_len(w, n, "w");
    threads = check_threads(threads);
    if (steps < 0) throw std::invalid_argument("`steps` must be >= 0");
    const I* pn = nb.data();
    check_table(pn, n * k, n, "`neighbors` holds an index outside the rows of `T`");
    const auto len = static_cast<py::ssize_t>(n);
    py::array_t<double> a({len, static_cast<py::ssize_t>(d)});
    py::array_t<double> b({len, static_cast<py::ssize_t>(d)});
    double* cur = a.mutable_data();
    double* next = b.mutable_data();
    {
        py::gil_scoped_release release;
        std::copy(T.data(), T.data() + n * d, cur);
        for (int s = 0; s < steps; ++s) {
            numtk::seriation::smooth_lines(cur, w.data(), pn, n, k, d, next, threads);
            std::swap(cur, next);
        }
    }
    return cur == a.mutable_data() ? a : b;
}

template <class I>
py::tuple increments(darray X, darray T, carray<I> indptr, carray<I> indices, darray w, int threads) {
    const std::size_t n = check_csr(indptr, indices);
    check_len(w, static_cast<std::size_t>(indices.shape(0)), "w");
    threads = check_threads(threads);
    if (X.ndim() != 2 || T.ndim() != 2 || static_cast<std::size_t>(X.shape(0)) != n || X.shape(0) != T.shape(0) ||
        X.shape(1) != T.shape(1))
        throw std::invalid_argument("`X` and `T` must be 2-D of the same shape, one row per graph node");
    const auto d = static_cast<std::size_t>(X.shape(1));
    py::array_t<double> dv(indices.shape(0));
    py::array_t<double> b(static_cast<py::ssize_t>(n));
    {
        py::gil_scoped_release release;
        numtk::seriation::increments(X.data(), T.data(), d, indptr.data(), indices.data(), w.data(), n,
                                     dv.mutable_data(), b.mutable_data(), threads);
    }
    return py::make_tuple(dv, b);
}

template <class I>
py::array_t<double> laplacian_apply(carray<I> indptr, carray<I> indices, darray w, darray deg, darray x,
                                    int threads) {
    const std::size_t n = check_csr(indptr, indices);
    check_len(w, static_cast<std::size_t>(indices.shape(0)), "w");
    check_len(deg, n, "deg");
    check_len(x, n, "x");
    threads = check_threads(threads);
    py::array_t<double> y(static_cast<py::ssize_t>(n));
    {
        py::gil_scoped_release release;
        numtk::seriation::laplacian_apply(indptr.data(), indices.data(), w.data(), deg.data(), n, x.data(),
                                          y.mutable_data(), threads);
    }
    return y;
}

template <class I>
py::array_t<double> tree_solve(carray<I> order, carray<I> parent, darray pw, darray r) {
    const auto n = static_cast<std::size_t>(order.ndim() == 1 ? order.shape(0) : 0);
    check_tree(order, parent, n);
    check_len(pw, n, "pw");
    check_len(r, n, "r");
    py::array_t<double> x(static_cast<py::ssize_t>(n));
    std::vector<double> S(n);
    std::fill(x.mutable_data(), x.mutable_data() + n, 0.0);
    numtk::seriation::tree_solve(order.data(), parent.data(), pw.data(), n, r.data(), x.mutable_data(), S.data());
    return x;
}

// A CSC triangular factor of m x m (indptr m + 1 from 0 to nnz, indices in [0, m), data nnz).
template <class I>
void check_csc(const carray<I>& p, const carray<I>& i, const darray& x, std::size_t m, const char* name) {
    if (p.ndim() != 1 || static_cast<std::size_t>(p.shape(0)) != m + 1 || i.ndim() != 1 || x.ndim() != 1 ||
        i.shape(0) != x.shape(0))
        throw std::invalid_argument(std::string("`") + name + "` must be a CSC matrix of the coarse size");
    const I* pp = p.data();
    if (pp[0] != 0 || static_cast<py::ssize_t>(pp[m]) != i.shape(0))
        throw std::invalid_argument(std::string("`") + name + "` indptr must run from 0 to nnz");
    for (std::size_t j = 0; j < m; ++j)
        if (pp[j + 1] < pp[j]) throw std::invalid_argument(std::string("`") + name + "` indptr must be non-decreasing");
    for (py::ssize_t e = 0; e < i.shape(0); ++e)
        if (i.data()[e] < 0 || static_cast<std::size_t>(i.data()[e]) >= m)
            throw std::out_of_range(std::string("`") + name + "` holds a row outside the matrix");
}

template <class I>
void check_permutation(const carray<I>& perm, std::size_t m, const char* name) {
    check_len(perm, m, name);
    std::vector<unsigned char> seen(m, 0);
    for (std::size_t a = 0; a < m; ++a) {
        const I v = perm.data()[a];
        if (v < 0 || static_cast<std::size_t>(v) >= m || seen[std::size_t(v)])
            throw std::invalid_argument(std::string("`") + name + "` must be a permutation");
        seen[std::size_t(v)] = 1;
    }
}

// The factors of scipy.sparse.linalg.splu as a SparseLU view (arrays validated, kept alive by the caller).
template <class I>
numtk::seriation::SparseLU<I> sparse_lu(const carray<I>& Lp, const carray<I>& Li, const darray& Lx,
                                        const carray<I>& Up, const carray<I>& Ui, const darray& Ux,
                                        const carray<I>& perm_r, const carray<I>& perm_c) {
    if (perm_r.ndim() != 1) throw std::invalid_argument("`perm_r` must be 1-D");
    const auto m = static_cast<std::size_t>(perm_r.shape(0));
    check_csc(Lp, Li, Lx, m, "L");
    check_csc(Up, Ui, Ux, m, "U");
    check_permutation(perm_r, m, "perm_r");
    check_permutation(perm_c, m, "perm_c");
    numtk::seriation::SparseLU<I> lu;
    lu.m = m;
    lu.Lp = Lp.data();
    lu.Li = Li.data();
    lu.Lx = Lx.data();
    lu.Up = Up.data();
    lu.Ui = Ui.data();
    lu.Ux = Ux.data();
    lu.perm_r = perm_r.data();
    lu.perm_c = perm_c.data();
    return lu;
}

template <class I>
py::array_t<double> lu_solve(carray<I> Lp, carray<I> Li, darray Lx, carray<I> Up, carray<I> Ui, darray Ux,
                             carray<I> perm_r, carray<I> perm_c, darray rhs) {
    const auto lu = sparse_lu(Lp, Li, Lx, Up, Ui, Ux, perm_r, perm_c);
    check_len(rhs, lu.m, "rhs");
    py::array_t<double> x(static_cast<py::ssize_t>(lu.m));
    std::vector<double> y(lu.m);
    lu.solve(rhs.data(), x.mutable_data(), y.data());
    return x;
}

template <class I>
py::tuple pcg(carray<I> indptr, carray<I> indices, darray w, darray deg, darray b, darray x0, carray<I> labels,
              int n_comp, int preconditioner, carray<I> order, carray<I> parent, darray pw, carray<I> aggregates,
              carray<I> coarse, carray<I> Lp, carray<I> Li, darray Lx, carray<I> Up, carray<I> Ui, darray Ux,
              carray<I> perm_r, carray<I> perm_c, double tol, int max_iter, int threads) {
    const std::size_t n = check_csr(indptr, indices);
    check_len(w, static_cast<std::size_t>(indices.shape(0)), "w");
    check_len(deg, n, "deg");
    check_len(b, n, "b");
    check_len(x0, n, "x0");
    check_len(labels, n, "labels");
    threads = check_threads(threads);
    if (n_comp < 1) throw std::invalid_argument("`n_comp` must be >= 1");
    for (std::size_t i = 0; i < n; ++i)
        if (labels.data()[i] < 0 || labels.data()[i] >= n_comp)
            throw std::invalid_argument("`labels` must lie in [0, n_comp)");
    if (preconditioner < 0 || preconditioner > 3)
        throw std::invalid_argument("`preconditioner` must be 0 (none), 1 (Jacobi), 2 (tree) or 3 (aggregation)");
    const auto pre = static_cast<numtk::seriation::Preconditioner>(preconditioner);
    if (pre == numtk::seriation::Preconditioner::tree) {
        check_tree(order, parent, n);
        check_len(pw, n, "pw");
    }
    numtk::seriation::CoarseGrid<I> grid;
    if (pre == numtk::seriation::Preconditioner::aggregation) {
        grid.lu = sparse_lu(Lp, Li, Lx, Up, Ui, Ux, perm_r, perm_c);
        check_len(aggregates, n, "aggregates");
        if (coarse.ndim() != 1) throw std::invalid_argument("`coarse` must be 1-D");
        grid.n_agg = static_cast<std::size_t>(coarse.shape(0));
        for (std::size_t i = 0; i < n; ++i)
            if (aggregates.data()[i] < 0 || static_cast<std::size_t>(aggregates.data()[i]) >= grid.n_agg)
                throw std::out_of_range("`aggregates` must lie in [0, len(coarse))");
        for (std::size_t a = 0; a < grid.n_agg; ++a)
            if (coarse.data()[a] >= 0 && static_cast<std::size_t>(coarse.data()[a]) >= grid.lu.m)
                throw std::out_of_range("`coarse` must lie below the size of the coarse factors");
        grid.labels = aggregates.data();
        grid.coarse = coarse.data();
    }
    if (!(tol >= 0)) throw std::invalid_argument("`tol` must be >= 0");
    if (max_iter < 0) throw std::invalid_argument("`max_iter` must be >= 0");
    py::array_t<double> x(static_cast<py::ssize_t>(n));
    std::copy(x0.data(), x0.data() + n, x.mutable_data());
    numtk::seriation::PcgInfo info;
    {
        py::gil_scoped_release release;
        info = numtk::seriation::pcg(indptr.data(), indices.data(), w.data(), deg.data(), n, b.data(),
                                     x.mutable_data(), labels.data(), std::size_t(n_comp), pre, order.data(),
                                     parent.data(), pw.data(), grid, tol, max_iter, threads);
    }
    return py::make_tuple(x, info.nit, info.residual, info.converged);
}

template <class I>
py::tuple aggregate(carray<I> indptr, carray<I> indices, darray w, double theta) {
    const std::size_t n = check_csr(indptr, indices);
    check_len(w, static_cast<std::size_t>(indices.shape(0)), "w");
    if (!(theta >= 0.0 && theta <= 1.0)) throw std::invalid_argument("`theta` must lie in [0, 1]");
    py::array_t<I> labels(static_cast<py::ssize_t>(n));
    std::size_t count = 0;
    {
        py::gil_scoped_release release;
        count = numtk::seriation::aggregate(indptr.data(), indices.data(), w.data(), n, labels.mutable_data(), theta);
    }
    return py::make_tuple(labels, count);
}

template <class I>
void bind_all(py::module_& m) {
    m.def("local_pca", &local_pca<I>, py::arg("X"), py::arg("neighbors"), py::arg("threads") = 1,
          py::arg("max_steps") = 64, py::arg("tol") = 1e-10,
          R"doc(Batched local PCA by Lanczos: (tangents (n, d), ratio lambda_2/lambda_1 (n,), max steps).

X float64 (rows, d); neighbors int32/int64 (n, k): row indices into X, one neighbourhood per output row.
tol = 0 runs every neighbourhood to the full Krylov space (exact). Runs with the GIL released.)doc");
    m.def("edge_cosines", &edge_cosines<I>, py::arg("T"), py::arg("indptr"), py::arg("indices"),
          py::arg("threads") = 1, "c[e] = <T_i, T_j> for every stored entry e = (i, j) of a CSR pattern.");
    m.def("shared_neighbours", &shared_neighbours<I>, py::arg("indptr"), py::arg("indices"), py::arg("threads") = 1,
          "s[e] = number of neighbours the endpoints of the stored entry e = (i, j) share (symmetric pattern,\n"
          "no self loops, each row's indices sorted; int32).");
    m.def("tree_signs", &tree_signs<I>, py::arg("indptr"), py::arg("indices"), py::arg("h"), py::arg("order"),
          py::arg("parent"), py::arg("z0"),
          "Signs along a spanning tree in breadth-first order: z[v] = z[parent] * sign(h(v, parent)).");
    m.def("power_signs", &power_signs<I>, py::arg("indptr"), py::arg("indices"), py::arg("h"), py::arg("z0"),
          py::arg("max_iter"), py::arg("threads") = 1,
          "Generalised power iterations z <- sign(H z) (ties keep z): (z, number of updates).");
    m.def("frustration", &frustration<I>, py::arg("indptr"), py::arg("indices"), py::arg("w"), py::arg("c"),
          py::arg("z"), "Weight share of the entries with z_i z_j c_ij < 0.");
    m.def("smooth_lines", &smooth_lines<I>, py::arg("T"), py::arg("w"), py::arg("neighbors"), py::arg("steps"),
          py::arg("threads") = 1,
          "`steps` averaging steps of the line field T (n, d) over the neighbour table (n, k): each row becomes\n"
          "the unit sum of sign(<T_i, T_j>) w_j T_j over its neighbours j (a zero or non-finite sum keeps T_i).");
    m.def("increments", &increments<I>, py::arg("X"), py::arg("T"), py::arg("indptr"), py::arg("indices"),
          py::arg("w"), py::arg("threads") = 1,
          "(d per entry, b): d_ij = <(T_i + T_j)/2, x_j - x_i>, b_i = -sum_j w_ij d_ij.");
    m.def("laplacian_apply", &laplacian_apply<I>, py::arg("indptr"), py::arg("indices"), py::arg("w"),
          py::arg("deg"), py::arg("x"), py::arg("threads") = 1, "y = (D - W) x.");
    m.def("tree_solve", &tree_solve<I>, py::arg("order"), py::arg("parent"), py::arg("pw"), py::arg("r"),
          "Exact solve of a spanning forest's Laplacian system (x = 0 at the roots).");
    m.def("aggregate", &aggregate<I>, py::arg("indptr"), py::arg("indices"), py::arg("w"), py::arg("theta") = 0.0,
          "Greedy plain aggregation of a graph on its strong edges (w_ij >= theta * max(max_k w_ik, max_k w_jk)):\n"
          "(labels (n,), number of aggregates). theta = 0: every edge is strong.");
    m.def("lu_solve", &lu_solve<I>, py::arg("Lp"), py::arg("Li"), py::arg("Lx"), py::arg("Up"), py::arg("Ui"),
          py::arg("Ux"), py::arg("perm_r"), py::arg("perm_c"), py::arg("rhs"),
          "x = A^-1 rhs from the CSC factors and permutations of scipy.sparse.linalg.splu(A).");
    m.def("pcg", &pcg<I>, py::arg("indptr"), py::arg("indices"), py::arg("w"), py::arg("deg"), py::arg("b"),
          py::arg("x0"), py::arg("labels"), py::arg("n_comp"), py::arg("preconditioner"), py::arg("order"),
          py::arg("parent"), py::arg("pw"), py::arg("aggregates"), py::arg("coarse"), py::arg("Lp"), py::arg("Li"),
          py::arg("Lx"), py::arg("Up"), py::arg("Ui"), py::arg("Ux"), py::arg("perm_r"), py::arg("perm_c"),
          py::arg("tol"), py::arg("max_iter"), py::arg("threads") = 1,
          R"doc(Preconditioned CG for (D - W) x = b on the complement of the per-component constants.

preconditioner: 0 none, 1 Jacobi, 2 spanning tree (order, parent, pw), 3 aggregation (Jacobi plus the
coarse correction on `aggregates`, the coarse system factored by splu: `coarse` maps an aggregate to its
unknown, < 0 when grounded; L, U, perm_r, perm_c the factors). Returns (x, iterations, relative residual
||b - L x|| / ||b|| recomputed at the end, converged).)doc");
}

}  // namespace

PYBIND11_MODULE(_seriation_ext, m) {
    m.doc() = "Compiled seriation kernels (private; use numtk.seriation).";
    bind_all<std::int32_t>(m);
    bind_all<std::int64_t>(m);
}
