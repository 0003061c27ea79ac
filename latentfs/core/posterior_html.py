"""How a :class:`~latentfs.core.results.Posterior` shows itself in a notebook (``_repr_html_``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from latentfs.core.posterior_checks import ESS_PER_CHAIN, RHAT_MAX

if TYPE_CHECKING:
    from latentfs.core.results import Posterior  # noqa: F401

__all__: list[str] = []


class HtmlMixin:
    """``_repr_html_``, mixed into :class:`~latentfs.core.results.Posterior`."""

    def _repr_html_(self: Any) -> str:
        """The result as a notebook shows it: model, method and kind; the convergence status, with a warning
        badge when the fit has not converged, was interrupted or was not checked; each site's kind, dims and
        shape; the diagnostics. Every string is HTML-escaped (feature, site and model names come from users)."""
        import html

        e = html.escape
        status, reasons = self._convergence_status()
        ok = status == "converged"
        colour = {"converged": "#1e7e34", "not checked": "#8a6d00"}.get(status, "#b02a37")
        badge = (f'<span class="latentfs-status" style="background:{colour};color:#fff;padding:1px 6px;'
                 f'border-radius:3px;font-weight:bold">{"✓" if ok else "⚠"} {e(status)}</span>')
        if self._draws:
            grid = next(iter(self._draws.values())).shape
            holds = f"draws: {grid[0]} chain(s) × {grid[1]} draws"
        else:
            holds = {"point": "point estimates (no bands)", "distribution": "fitted distributions"}.get(
                self.kind(), "fitted distributions and point estimates")
        parts = [
            '<div class="latentfs-posterior">',
            f"<p><b>Posterior</b> of <code>{e(self.model)}</code> by <code>{e(self.method)}</code>, "
            f"kind <code>{e(self.kind())}</code> ({e(holds)}) {badge}</p>",
        ]
        if reasons:
            parts.append("<ul>" + "".join(f"<li>{e(r)}</li>" for r in reasons) + "</ul>")
        if self.alignment is not None:
            parts.append(f"<p>components relabelled on site <code>{e(str(self.alignment.get('site')))}</code>: "
                         f"{e(str(self.alignment.get('method', '')))}</p>")
        rows = []
        for site in self.sites:
            shape = self._site_shape(site)
            dims = self.dims.get(site, ())
            if len(dims) == len(shape):
                layout = " × ".join(f"{d} ({n})" for d, n in zip(dims, shape, strict=True))
            else:
                layout = " × ".join(map(str, shape)) or "scalar"
            kind = self.kind(site)
            family = "" if kind == "draws" else self._fitted[site]["family"]
            rows.append(f"<tr><td><code>{e(site)}</code></td><td>{e(kind)}</td><td>{e(family)}</td>"
                        f"<td>{e(layout)}</td></tr>")
        parts.append("<table><thead><tr><th>site</th><th>kind</th><th>family</th><th>dims (size)</th></tr>"
                     "</thead><tbody>" + "".join(rows) + "</tbody></table>")
        convergence = self.diagnostics.get("convergence")
        if isinstance(convergence, dict) and convergence:
            head = ("<tr><th>site</th><th>max R̂</th><th>min bulk ESS</th><th>min tail ESS</th>"
                    "<th>entries checked</th></tr>")
            body = "".join(
                f"<tr><td><code>{e(str(site))}</code></td>"
                + "".join(f"<td>{e(self._html_value(entry.get(k)))}</td>"
                          for k in ("r_hat_max", "ess_bulk_min", "ess_tail_min"))
                + f"<td>{e(str(entry.get('entries_checked')))} of {e(str(entry.get('n_entries')))}</td></tr>"
                for site, entry in convergence.items() if isinstance(entry, dict))
            parts.append(f"<p>convergence of the draws (rank-normalised R̂ ≤ {RHAT_MAX}, ESS ≥ {ESS_PER_CHAIN} "
                         f"per chain)</p><table><thead>{head}</thead><tbody>{body}</tbody></table>")
        rest = {k: v for k, v in self.diagnostics.items() if k != "convergence"}
        if rest:
            body = "".join(f"<tr><td><code>{e(str(k))}</code></td><td>{e(self._html_value(v))}</td></tr>"
                           for k, v in rest.items())
            parts.append(f"<details open><summary>diagnostics ({len(rest)})</summary><table><tbody>{body}</tbody>"
                         "</table></details>")
        parts.append("</div>")
        return "\n".join(parts)

    def _convergence_status(self: Any) -> tuple[str, list[str]]:
        """``(status, reasons)`` from what the fit recorded in :attr:`diagnostics`: ``"interrupted"``,
        ``"not converged"`` (an optimiser's ``converged`` is False; a sampled site fails the R̂ / ESS rule of
        :meth:`check_convergence`; chains sit in poorer modes), ``"converged"``, or ``"not checked"`` when
        nothing was recorded (an online fit, or draws never checked)."""
        d = self.diagnostics
        reasons: list[str] = []
        checked = False
        if d.get("interrupted"):
            reasons.append(f"interrupted (Ctrl-C) after {d.get('n_iter', '?')} iterations: the result holds the "
                           "state reached so far")
        if d.get("converged") is not None:
            checked = True
            if not d["converged"] and not d.get("interrupted"):
                reasons.append(f"the optimiser stopped after {d.get('n_iter', '?')} iterations before its "
                               "tolerance was met: raise max_iter or loosen tol")
        convergence = d.get("convergence")
        for site, entry in (convergence.items() if isinstance(convergence, dict) else ()):
            if not isinstance(entry, dict):
                continue
            rhat, bulk, tail = (entry.get(k) for k in ("r_hat_max", "ess_bulk_min", "ess_tail_min"))
            chains = self._draws[site].shape[0] if site in self._draws else self.trace.shape[0]
            need = ESS_PER_CHAIN * chains
            found = []
            if isinstance(rhat, (int, float)) and np.isfinite(rhat):
                checked = True
                if rhat > RHAT_MAX:
                    found.append(f"max R̂ {rhat:.3f} > {RHAT_MAX}")
            for value, label in ((bulk, "bulk"), (tail, "tail")):
                if isinstance(value, (int, float)) and np.isfinite(value):
                    checked = True
                    if value < need:
                        found.append(f"min {label} ESS {value:.0f} < {need}")
            if found:
                reasons.append(f"site {site!r} has not converged ({'; '.join(found)}): raise num_warmup and "
                               "num_samples, or use more chains")
        modes = d.get("chain_modes")
        if isinstance(modes, dict) and modes.get("poorer_chains"):
            reasons.append(f"chains {list(modes['poorer_chains'])} sit in poorer modes than chain "
                           f"{modes.get('best_chain')}: compare result.trace, or refit with another seed")
        if d.get("interrupted"):
            return "interrupted", reasons
        if reasons:
            return "not converged", reasons
        return ("converged" if checked else "not checked"), reasons

    def _site_shape(self: Any, site: str) -> tuple[int, ...]:
        """The shape of one value of ``site``, read from the stored arrays (nothing is drawn or averaged)."""
        if site in self._draws:
            return tuple(self._draws[site].shape[2:])
        spec = self._fitted[site]
        if spec["family"] == "wishart":
            return tuple(np.broadcast_shapes((*spec["dof"].shape, 1, 1), spec["scale"].shape))
        return tuple(np.broadcast_shapes(*(np.shape(v) for k, v in spec.items() if k != "family")))

    @staticmethod
    def _html_value(value: Any, limit: int = 6) -> str:
        """A diagnostics value in a few characters: floats to 6 significant digits, long sequences cut."""
        if isinstance(value, (bool, np.bool_)) or value is None:
            return str(value)
        if isinstance(value, (float, np.floating)):
            return f"{float(value):.6g}"
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if isinstance(value, (list, tuple)):
            shown = ", ".join(HtmlMixin._html_value(v, limit) for v in value[:limit])
            return f"[{shown}{f', … ({len(value)} items)' if len(value) > limit else ''}]"
        if isinstance(value, dict):
            items = list(value.items())
            shown = ", ".join(f"{k}: {HtmlMixin._html_value(v, limit)}" for k, v in items[:limit])
            return "{" + shown + (f", … ({len(items)} entries)" if len(items) > limit else "") + "}"
        return str(value)
