"""Relabelling a :class:`~latentfs.core.results.Posterior`'s draws on every component-indexed site jointly
(its :meth:`~latentfs.core.results.Posterior.align`), apart from the result type itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from latentfs.core.count_draws import CountStateDraws
from latentfs.core.data import DataError
from latentfs.core.relabel import apply_draw_permutations, apply_permutations, modal_permutations, relabel_draws

if TYPE_CHECKING:
    from latentfs.core.results import Posterior

__all__: list[str] = []

# Chain-level running means are relabelled by the chain's modal permutation; past this share of draws in
# another labelling they mix labels visibly and the result warns.
_SWITCH_TOLERANCE = 0.05


class AlignMixin:
    """:meth:`align` and its joint matching, mixed into :class:`~latentfs.core.results.Posterior`."""

    relabel_permutations: np.ndarray | None
    alignment: dict[str, Any] | None

    def align(
        self: Any,
        site: str,
        component_dim: str = "component",
        *,
        chain_extras: dict[str, int] | None = None,
        also: tuple[str, ...] = (),
        warn: bool = True,
        match_on: tuple[str, ...] | None = None,
    ) -> Posterior:
        """Relabel the components of every draw, within and across chains (in place); records how.

        Each draw is matched to one pivot labelling (:func:`latentfs.core.relabel.relabel_draws`, Stephens
        2000) on every component-indexed site jointly: ``site`` and, by default, every other stored site with a
        ``component_dim`` axis that is a global parameter (no axis over observations, such as a document's
        proportions), each feature measured in its within-component spread (:meth:`_joint_relabel`; ``match_on``
        names the sites instead). Matching on one site alone leaves draws whose components that site cannot tell
        apart (two HMM states with overlapping means) with their other sites swapped. Every stored site with a
        ``component_dim`` axis is then permuted the same way, draw by draw; dims named in ``also`` index the
        same components (the destination state of a transition matrix, say) and are permuted the same way.
        ``chain_extras`` maps the name of an extras array
        shaped ``(chain, ...)`` (a running mean over a chain's draws) to its component axis within one
        chain's array; each is permuted by its chain's
        modal permutation, and if more than 5% of a chain's draws were in another labelling a
        :class:`~latentfs.core.driver.ConvergenceWarning` says that such outputs mix labels (``warn=False``
        silences it). The result's
        ``alignment`` records the method, each chain's modal permutation (``permutations``) and switch share;
        ``relabel_permutations`` holds every draw's permutation (chain, draw, K). The draws are permuted in place
        (an array returned earlier by :meth:`samples` changes with them; copy it to keep the old labelling).
        """
        import warnings

        if site not in self._draws:
            return self
        matched = self._matching_sites(site, component_dim, match_on)
        if len(matched) == 1:
            perms, iterations = relabel_draws(self._draws[site], component_axis=self.dims[site].index(component_dim))
        else:
            perms, iterations = self._joint_relabel(self._joint_components(matched, component_dim, also))
        for s, arr in self._draws.items():
            for ax, name in enumerate(self.dims.get(s, ())):
                if name == component_dim or name in also:
                    if isinstance(arr, CountStateDraws):  # count states keep each draw's permutation
                        if ax != 0:
                            raise DataError(f"count-state site {s!r} has its components on axis {ax}, not 0.")
                        arr.permute(perms)
                    else:  # the result owns its draws: permute them where they are (no second copy of the site)
                        arr = apply_draw_permutations(arr, perms, ax, in_place=True)
            self._draws[s] = arr
        self._convergence_cache.clear()  # the draws are relabelled: R̂ and ESS are computed again
        modes, switched = modal_permutations(perms)
        for name, comp_axis in (chain_extras or {}).items():
            arr = self.extras[name]
            if arr.shape[0] != perms.shape[0]:
                raise DataError(
                    f"chain_extras[{name!r}] must have one entry per chain ({perms.shape[0]}); got shape "
                    f"{arr.shape}. Keep per-chain arrays until the result is aligned."
                )
            self.extras[name] = apply_permutations(arr[:, None], modes, comp_axis)[:, 0]
        if warn and chain_extras and float(switched.max()) > _SWITCH_TOLERANCE:
            from latentfs.core.convergence_warning import ConvergenceWarning  # imports scikit-learn: only to warn

            warnings.warn(
                f"labels switched within a chain ({float(switched.max()):.0%} of one chain's draws are in "
                f"another labelling); the chain-level outputs {sorted(chain_extras)} mix components. Store "
                "the per-draw sites instead (store=...), or run a longer warm-up.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.relabel_permutations = perms
        self.alignment = {
            "method": "per-draw Hungarian matching to an iterated pivot (Stephens 2000)",
            "site": site,
            "matched_on": list(matched),
            "dim": component_dim,
            "also": list(also),
            "iterations": int(iterations),
            "permutations": [m.tolist() for m in modes],
            "switch_share": switched.tolist(),
            "chain_extras": sorted(chain_extras or {}),
        }
        return self

    def _matching_sites(self: Any, site: str, component_dim: str, match_on: tuple[str, ...] | None) -> list[str]:
        """The sites :meth:`align` matches on: ``match_on``, else ``site`` and every stored global site with a
        ``component_dim`` axis."""
        if match_on is not None:
            missing = [s for s in match_on if s not in self._draws or component_dim not in self.dims.get(s, ())]
            if missing:
                raise DataError(f"match_on names sites without draws over {component_dim!r}: {missing}; choose from "
                                f"{sorted(s for s in self._draws if component_dim in self.dims.get(s, ()))}.")
            return list(dict.fromkeys(match_on))
        local = self.diagnostics.get("observation_dim")
        shape = self._draws[site].shape[:2]
        return [site] + [s for s, v in self._draws.items() if s != site and component_dim in self.dims.get(s, ())
                         and local not in self.dims.get(s, ()) and v.shape[:2] == shape]

    def _joint_components(
        self: Any, sites: list[str], component_dim: str, also: tuple[str, ...] = ()
    ) -> list[np.ndarray]:
        """Each site's values per component, (chain, draw, K, features), on the log scale where a site is
        positive (variances, weights, rates: their draws are skewed). A site with a second axis over the same
        components (a transition matrix's destination, named in ``also``) gives its diagonal (the self-transition
        probabilities): its other entries move with both labellings at once and cannot be matched row by row."""
        parts = []
        for s in sites:
            dims = self.dims[s]
            arr = np.asarray(self._draws[s], dtype=np.float64)
            second = [i for i, name in enumerate(dims) if name in also]
            if second:
                arr = np.diagonal(arr, axis1=2 + dims.index(component_dim), axis2=2 + second[0])  # K last
                arr = np.moveaxis(arr, -1, 2)
            else:
                arr = np.moveaxis(arr, 2 + dims.index(component_dim), 2)
            arr = arr.reshape(arr.shape[0], arr.shape[1], arr.shape[2], -1)
            if (arr > 0).all():
                arr = np.log(arr)
            parts.append(arr)
        return parts

    @staticmethod
    def _joint_relabel(parts: list[np.ndarray], rounds: int = 3) -> tuple[np.ndarray, int]:
        """Permutations from every site jointly, starting from the first site's own labelling: then each feature
        is measured in units of its posterior spread within a component under the current labelling (the median
        absolute deviation: draws in which a component is empty and wanders over its prior would otherwise make
        the informative site look noisy), so a site whose
        components sit far apart in its own noise units decides and a noisy one hardly counts (two HMM states
        whose means overlap are told apart by their variances), and the matching is repeated until the
        labelling stops changing (at most ``rounds`` times)."""
        from latentfs.core.relabel import apply_draw_permutations

        perms, iterations = relabel_draws(parts[0], component_axis=0)
        for _ in range(rounds):
            aligned = [apply_draw_permutations(p, perms, 0) for p in parts]
            scales = [_within_spread(a) for a in aligned]
            joint = np.concatenate([p / np.where(sc > 0, sc, 1.0) for p, sc in zip(parts, scales, strict=True)],
                                   axis=3)
            new, iterations = relabel_draws(joint, component_axis=0)
            if np.array_equal(new, perms):
                break
            perms = new
        return perms, iterations


def _within_spread(aligned: np.ndarray) -> np.ndarray:
    """The spread of each feature within a component, over draws and chains, averaged over components: 1.4826 ×
    the median absolute deviation (the sd for normal draws). ``aligned`` is (chain, draw, K, features)."""
    center = np.median(aligned, axis=(0, 1), keepdims=True)
    return 1.4826 * np.median(np.abs(aligned - center), axis=(0, 1)).mean(axis=0)
